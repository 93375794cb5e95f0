// The translation unit of the layering probes (tests/CMakeLists.txt): the
// header under test comes in by -include, compiled against one layer's
// include root, so it builds exactly when that layer may include it.
int main() { return 0; }
