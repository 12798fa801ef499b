// The translation unit that owns the tests' shared precompiled header
// (tests/CMakeLists.txt): every unit and integration test reuses it.
