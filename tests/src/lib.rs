//! End-to-end tests live in `e2e/` (one test binary); this library is empty.
