// The one error type of raggemm: every rejected input names the argument and
// the offending value, so a CLI can print one line and a caller can branch on
// the argument without parsing prose.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace raggemm {

class Error : public std::runtime_error {
 public:
  // what() reads "<argument>=<value>: <message>".
  Error(std::string argument, std::string value, const std::string& message);

  const std::string& argument() const { return argument_; }
  const std::string& value() const { return value_; }

 private:
  std::string argument_;
  std::string value_;
};

// Formats any streamable value for an Error.
template <class T>
std::string to_display(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

[[noreturn]] void fail(const std::string& argument, const std::string& value,
                       const std::string& message);

// Checks a condition and throws Error naming argument and value otherwise.
// Argument and message are views so that a passing check builds no string:
// kernels call require per span, where a heap-allocated message per call
// showed up in callgrind profiles.
template <class T>
void require(bool condition, std::string_view argument, const T& value,
             std::string_view message) {
  if (!condition) fail(std::string(argument), to_display(value), std::string(message));
}

}  // namespace raggemm
