//! loom models of the hostcall core live in `tests/` and run under `--cfg loom`.
