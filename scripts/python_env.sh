#!/usr/bin/env bash
# Creates (once) the virtual environment the Python tests run in, at .venv/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.requirements-installed
if [ ! -f "$stamp" ] || [ requirements-test.txt -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r requirements-test.txt
  touch "$stamp"
fi
