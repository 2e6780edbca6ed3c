//! One file per Kafka API family: typed request in, typed response out. No sockets, no files.

pub mod fetch_encode;
