"""raggemm.trace: the Trace Event Format's rules (metadata naming every
process and track, complete events that nest per track), spans holding the
GMM events, and the GMM events' fields, for numpy, torch and JAX calls."""

import json
import threading

import numpy as np
import pytest

import raggemm

GMM_FIELDS = {"pass": str, "weight": str, "kernel": str, "tile_m": int, "tile_k": int,
              "tile_n": int, "tile_m_source": str, "tile_k_source": str, "tile_n_source": str,
              "kernel_source": str, "M": int, "K": int, "N": int, "G": int, "flops": float,
              "gflops_per_s": float}


def check_format(trace):
    """Returns {(pid, tid): [X events sorted by start, longest first]}."""
    named_processes, named_threads, tracks = set(), set(), {}
    for event in trace["traceEvents"]:
        assert isinstance(event["name"], str) and isinstance(event["pid"], int)
        assert isinstance(event["tid"], int)
        if event["ph"] == "M":
            assert event["name"] in ("process_name", "thread_name")
            (named_processes.add(event["pid"]) if event["name"] == "process_name"
             else named_threads.add((event["pid"], event["tid"])))
            continue
        assert event["ph"] == "X" and event["dur"] >= 0 and event["ts"] >= 0
        tracks.setdefault((event["pid"], event["tid"]), []).append(event)
    for track, events in tracks.items():
        assert track[0] in named_processes and track in named_threads
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for event in events:  # any two slices of a track are disjoint or nested
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= event["ts"] + 1e-3:
                stack.pop()
            if stack:
                assert event["ts"] + event["dur"] <= stack[-1]["ts"] + stack[-1]["dur"] + 1e-3
            event["parent"] = stack[-1]["name"] if stack else None
            stack.append(event)
    return tracks


WORKER_TRACK_BASE = 1000  # a worker track's tid: 1000 * calling track + OpenMP worker


def calling_tracks(tracks):
    """The calling threads' tracks (the worker tracks left out)."""
    return {track: events for track, events in tracks.items() if track[1] < WORKER_TRACK_BASE}


def check_worker_tracks(tracks):
    """Every GMM event holds >= 1 "worker" slice (same pid, args gmm = its
    name) on a worker track of its calling track, and every worker slice
    lies in such an event. Returns the number of worker slices."""
    gmms = [e for events in tracks.values() for e in events if e["cat"] == "expert_gmm"]
    workers = [(track, e) for track, events in tracks.items() for e in events
               if e["cat"] == "worker"]
    held = {id(g): 0 for g in gmms}
    for (pid, tid), worker in workers:
        assert tid >= WORKER_TRACK_BASE and worker["args"]["worker"] == tid % WORKER_TRACK_BASE
        assert worker["args"]["items"] >= 1
        owners = [g for g in gmms if g["pid"] == pid and g["name"] == worker["args"]["gmm"]
                  and g["tid"] == tid // WORKER_TRACK_BASE
                  and g["ts"] <= worker["ts"] + 1e-3
                  and worker["ts"] + worker["dur"] <= g["ts"] + g["dur"] + 1e-3]
        assert owners, f"worker slice outside its GMM event: {worker}"
        held[id(min(owners, key=lambda g: g["dur"]))] += 1
    assert all(held.values()), "a GMM event without worker slices"
    return len(workers)


def check_gmm(event, pass_, weight):
    args = event["args"]
    for key, kind in GMM_FIELDS.items():
        assert isinstance(args[key], (int, float) if kind is float else kind), (key, event)
    assert args["pass"] == pass_ and args["weight"] == weight
    assert args["kernel"] in ("v1", "v2")
    assert {args[f"tile_{a}_source"] for a in "mkn"} <= {"explicit", "cache", "heuristic"}


def problem(seed=0, m=48, k=16, n=24, sizes=(20, 0, 28)):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((len(sizes), k, n)).astype(np.float32),
            np.array(sizes, np.int32))


def test_numpy_calls_nest_in_step_and_layer_spans_with_their_fields(tmp_path):
    lhs, rhs, sizes = problem()
    path = tmp_path / "trace.json"
    with raggemm.trace(path, rank=2):
        for step in range(2):
            with raggemm.trace_span("step", step=step):
                with raggemm.trace_span("layer", layer="layers_0"):
                    out = raggemm.gmm(lhs, rhs, sizes, weight="wi")
                    raggemm.gmm(out, rhs, sizes, transpose_rhs=True, weight="wi",
                                kernel="v1", tiles=(8, 8, 8))
                    raggemm.tgmm(lhs, out, sizes, weight="wi")
    raggemm.gmm(lhs, rhs, sizes)  # after the block: not recorded
    all_tracks = check_format(json.loads(path.read_text()))
    tracks = calling_tracks(all_tracks)
    assert list(tracks) == [(2, 1)]  # pid = rank, one calling thread
    assert check_worker_tracks(all_tracks) >= 6  # the workers of the 6 calls
    assert {pid for pid, _ in all_tracks} == {2}
    events = tracks[(2, 1)]
    gmms = [e for e in events if e["cat"] == "expert_gmm"]
    assert [e["args"]["pass"] for e in gmms] == ["fwd", "dlhs", "drhs"] * 2
    for event in gmms:
        assert event["parent"] == "layer"
        check_gmm(event, event["args"]["pass"], "wi")
        assert (event["args"]["M"], event["args"]["K"], event["args"]["N"],
                event["args"]["G"]) == (48, 16, 24, 3)
    explicit = gmms[1]["args"]
    assert explicit["kernel"] == "v1" and explicit["kernel_source"] == "explicit"
    assert explicit["tile_m"] == 8 and explicit["tile_m_source"] == "explicit"
    assert [e["parent"] for e in events if e["name"] == "layer"] == ["step", "step"]
    assert [e["args"]["step"] for e in events if e["name"] == "step"] == [0, 1]


def test_threads_get_their_own_tracks_and_a_second_trace_is_refused(tmp_path):
    lhs, rhs, sizes = problem(1)
    path = tmp_path / "threads.json"
    with raggemm.trace(path):
        with pytest.raises(raggemm.Error, match="already"):
            with raggemm.trace(tmp_path / "other.json"):
                pass
        # Alive together (a finished thread's id may be reused by the next).
        together = threading.Barrier(3)

        def work():
            together.wait()
            raggemm.gmm(lhs, rhs, sizes)
            together.wait()

        workers = [threading.Thread(target=work) for _ in range(3)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    all_tracks = check_format(json.loads(path.read_text()))
    tracks = calling_tracks(all_tracks)
    assert len(tracks) == 3 and all(len(events) == 1 for events in tracks.values())
    check_worker_tracks(all_tracks)
    assert not (tmp_path / "other.json").exists()


def test_jax_and_torch_calls_are_traced_with_the_plan_s_weight(tmp_path):
    jax = pytest.importorskip("jax")
    torch = pytest.importorskip("torch")
    import raggemm.jax as rjax
    import raggemm.torch as rtorch

    lhs, rhs, sizes = problem(2)
    plan = raggemm.Plan(weight="wo")
    path = tmp_path / "frameworks.json"
    grad = jax.jit(jax.grad(lambda a, b: rjax.ragged_dot(a, b, sizes, plan=plan).sum(),
                            argnums=(0, 1)))
    jax.block_until_ready(grad(lhs, rhs))  # compiled outside the trace
    with raggemm.trace(path):
        with raggemm.trace_span("jax"):
            jax.block_until_ready(grad(lhs, rhs))
        with raggemm.trace_span("torch"):
            a = torch.from_numpy(lhs).requires_grad_(True)
            rtorch.ragged_dot(a, torch.from_numpy(rhs), torch.from_numpy(sizes),
                              plan=plan).sum().backward()
    tracks = check_format(json.loads(path.read_text()))
    gmms = [e for events in tracks.values() for e in events if e["cat"] == "expert_gmm"]
    # JAX: the gradient of a sum needs no forward value (XLA drops it): dlhs
    # and drhs; torch: fwd, and dlhs only (rhs needs no gradient).
    assert sorted(e["args"]["pass"] for e in gmms) == ["dlhs", "dlhs", "drhs", "fwd"]
    for event in gmms:
        check_gmm(event, event["args"]["pass"], "wo")
