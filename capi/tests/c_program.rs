#[test] fn t() {}
