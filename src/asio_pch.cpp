// The translation unit that owns the precompiled Boost.Asio/Beast header
// (kvgate_use_asio_pch in the top CMakeLists.txt).
