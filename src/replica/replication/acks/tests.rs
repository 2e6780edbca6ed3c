//! Tests follow in the next commit.
