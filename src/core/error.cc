#include "raggemm/error.h"

namespace raggemm {

Error::Error(std::string argument, std::string value, const std::string& message)
    : std::runtime_error(argument + "=" + value + ": " + message),
      argument_(std::move(argument)),
      value_(std::move(value)) {}

void fail(const std::string& argument, const std::string& value, const std::string& message) {
  throw Error(argument, value, message);
}

}  // namespace raggemm
