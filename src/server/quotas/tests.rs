//! Kafka's counting rules: per-address limits refuse, overrides win, the broker-wide limit only
//! reports whether a slot is free, and releases give counts back.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn per_ip_limit_refuses_and_release_admits_again() {
    let mut c = ConnectionCounts::new(10, 2, &BTreeMap::new());
    let a = ip("127.0.0.1");
    assert_eq!(c.admit(a), Ok(()));
    assert_eq!(c.admit(a), Ok(()));
    assert_eq!(c.admit(a), Err(TooManyForIp { ip: a, limit: 2 }));
    assert_eq!(
        c.admit(ip("127.0.0.2")),
        Ok(()),
        "another address has its own count"
    );
    assert_eq!(c.total(), 3);
    c.release(a);
    assert_eq!(c.admit(a), Ok(()));
    assert_eq!(c.total(), 3);
}

#[test]
fn overrides_win_over_the_default_and_match_mapped_ipv4() {
    let overrides = BTreeMap::from([(ip("127.0.0.9"), 1), (ip("10.0.0.1"), 0)]);
    let mut c = ConnectionCounts::new(100, 5, &overrides);
    assert_eq!(c.admit(ip("127.0.0.9")), Ok(()));
    assert!(c.admit(ip("127.0.0.9")).is_err());
    assert_eq!(
        c.admit(ip("::ffff:10.0.0.1")),
        Err(TooManyForIp {
            ip: ip("::ffff:10.0.0.1"),
            limit: 0
        })
    );
    assert_eq!(c.total(), 1, "refusals are not counted");
}

#[test]
fn the_broker_wide_limit_is_a_slot_check() {
    let mut c = ConnectionCounts::new(2, usize::MAX, &BTreeMap::new());
    assert!(c.slot_available());
    c.admit(ip("127.0.0.1")).unwrap();
    c.admit(ip("127.0.0.2")).unwrap();
    assert!(!c.slot_available());
    c.release(ip("127.0.0.2"));
    assert!(c.slot_available());
    // Releasing an address that has no connection changes nothing.
    c.release(ip("127.0.0.3"));
    assert_eq!(c.total(), 1);
}
