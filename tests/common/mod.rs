//! Helpers shared by the integration tests that start real `sluice` processes.

/// A port free on 127.0.0.1 with the next `n - 1` ports free too (consecutive node ports).
pub fn free_ports(n: u16) -> u16 {
    loop {
        let first = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if first > 60000 {
            continue;
        }
        if (0..n).all(|i| std::net::TcpListener::bind(("127.0.0.1", first + i)).is_ok()) {
            return first;
        }
    }
}
