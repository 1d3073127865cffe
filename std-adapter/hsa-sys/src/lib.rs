//! HSA runtime bindings, loaded at run time (work in progress).
