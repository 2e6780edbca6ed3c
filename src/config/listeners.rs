//! Kafka's listener keys: `listeners`, `advertised.listeners`, `listener.security.protocol.map`,
//! `inter.broker.listener.name`, `controller.listener.names`, parsed and cross-checked with Kafka's
//! rules and messages, into the [`Listener`]s the broker binds.
//!
//! Rules (Kafka's `KafkaConfig` / `SocketServerConfigs` validation): endpoints are
//! `NAME://host:port` (host empty = all interfaces, `[::1]` for IPv6); names are case-insensitive
//! and unique, ports unique; every name needs a security protocol in the map; the advertised names
//! are a subset of the listener names, default the listeners themselves (less the controller
//! ones), and may not use the meta-address `0.0.0.0`; `inter.broker.listener.name` must be
//! advertised. Sluice has no TLS or SASL yet: a listener mapped to anything but PLAINTEXT is refused.
//!
//! Host names are resolved to bind (`localhost` is 127.0.0.1 without a lookup, so an empty root
//! with no `/etc/hosts` works); otherwise pure.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};

/// One listener the broker binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// Upper-case listener name (`PLAINTEXT`, `CONTROLLER`, ...).
    pub name: String,
    pub bind: SocketAddr,
    /// What Metadata, FindCoordinator and DescribeCluster tell clients that connected through this
    /// listener. `None` for a controller listener (never advertised to clients).
    pub advertised: Option<(String, u16)>,
    /// Named in `controller.listener.names`.
    pub controller: bool,
}

/// A parsed `NAME://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// Kafka's default `listener.security.protocol.map`.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT";

/// The raw listener keys, as given (None: not set).
#[derive(Debug, Default, Clone)]
pub struct ListenerKeys {
    pub listeners: Option<String>,
    pub advertised: Option<String>,
    pub protocol_map: Option<String>,
    pub inter_broker: Option<String>,
    pub controller_names: Option<String>,
    /// `process.roles=broker`: the controller listeners are the quorum's, not bound here.
    pub broker_only: bool,
    /// `process.roles=controller`: no broker listener, so none is advertised (Kafka checks the
    /// advertised broker listeners and `inter.broker.listener.name` only with the broker role).
    pub controller_only: bool,
}

/// A listener-key error: the key and Kafka's reason.
pub type KeyError = (&'static str, String);

/// Parses a comma-separated endpoint list.
pub fn parse_endpoints(key: &'static str, s: &str) -> Result<Vec<Endpoint>, KeyError> {
    s.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| parse_endpoint(e).ok_or_else(|| (key, endpoint_error(e))))
        .collect()
}

fn endpoint_error(e: &str) -> String {
    format!("Unable to parse {e} to a broker endpoint (expected NAME://HOST:PORT)")
}

/// `NAME://host:port`, `NAME://:port`, `NAME://[::1]:port`.
pub fn parse_endpoint(s: &str) -> Option<Endpoint> {
    let (name, rest) = s.split_once("://")?;
    let (host, port) = rest.rsplit_once(':')?;
    let host = match host.strip_prefix('[') {
        Some(h) => h.strip_suffix(']')?,
        None if host.contains(':') => return None,
        None => host,
    };
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '%' | '.' | '_' | ':');
    if name.is_empty() || !host.chars().all(valid) {
        return None;
    }
    Some(Endpoint {
        name: name.to_ascii_uppercase(),
        host: host.to_string(),
        port: port.parse().ok()?,
    })
}

/// Parses `NAME:PROTOCOL,...` (names upper-cased).
fn parse_protocol_map(s: &str) -> Result<Vec<(String, String)>, KeyError> {
    let key = "listener.security.protocol.map";
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, proto) = item.split_once(':').ok_or_else(|| {
            (
                key,
                format!("Map entry should be of form <key>:<value>, got {item}"),
            )
        })?;
        let proto = proto.trim().to_ascii_uppercase();
        if !matches!(
            proto.as_str(),
            "PLAINTEXT" | "SSL" | "SASL_PLAINTEXT" | "SASL_SSL"
        ) {
            return Err((
                key,
                format!("No enum constant for security protocol {proto}"),
            ));
        }
        out.push((name.trim().to_ascii_uppercase(), proto));
    }
    Ok(out)
}

/// Resolves the listener keys into the listeners to bind. `hostname` is what an empty advertised
/// host means (Kafka advertises the machine's canonical host name).
pub fn resolve(keys: &ListenerKeys, hostname: &str) -> Result<Vec<Listener>, Vec<KeyError>> {
    let mut errors = Vec::new();
    let listeners = match parse_endpoints(
        "listeners",
        keys.listeners.as_deref().unwrap_or("PLAINTEXT://:9092"),
    ) {
        Ok(l) => l,
        Err(e) => return Err(vec![e]),
    };
    if listeners.is_empty() {
        return Err(vec![(
            "listeners",
            "must name at least one listener".into(),
        )]);
    }
    let list_text = keys.listeners.clone().unwrap_or_default();
    for (i, l) in listeners.iter().enumerate() {
        if listeners[..i].iter().any(|o| o.name == l.name) {
            errors.push((
                "listeners",
                format!("Each listener must have a different name, listeners: {list_text}"),
            ));
        }
        if listeners[..i]
            .iter()
            .any(|o| o.port == l.port && l.port != 0)
        {
            errors.push((
                "listeners",
                format!("Each listener must have a different port, listeners: {list_text}"),
            ));
        }
    }
    let controller_names: Vec<String> = keys
        .controller_names
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(|n| n.trim().to_ascii_uppercase())
        .filter(|n| !n.is_empty())
        .collect();
    if !keys.broker_only
        && !controller_names.is_empty()
        && !controller_names
            .iter()
            .any(|c| listeners.iter().any(|l| &l.name == c))
    {
        errors.push((
            "controller.listener.names",
            "controller.listener.names must contain at least one value appearing in the \
             'listeners' configuration when running the KRaft controller role"
                .into(),
        ));
    }
    // Kafka treats controller listeners missing from a default map as PLAINTEXT.
    let map = match parse_protocol_map(keys.protocol_map.as_deref().unwrap_or(DEFAULT_PROTOCOL_MAP))
    {
        Ok(m) => m,
        Err(e) => return Err(vec![e]),
    };
    let protocol_of = |name: &str| -> Option<String> {
        map.iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.clone())
            .or_else(|| {
                (keys.protocol_map.is_none() && controller_names.iter().any(|c| c == name))
                    .then(|| "PLAINTEXT".to_string())
            })
    };
    for l in &listeners {
        match protocol_of(&l.name) {
            None => errors.push((
                "listener.security.protocol.map",
                format!("No security protocol defined for listener {}", l.name),
            )),
            Some(p) if p != "PLAINTEXT" => errors.push((
                "listener.security.protocol.map",
                format!(
                    "listener {} uses security protocol {p}; Sluice serves PLAINTEXT only \
                     (TLS and SASL are not implemented yet)",
                    l.name
                ),
            )),
            Some(_) => {}
        }
    }
    let advertised = match &keys.advertised {
        Some(a) => match parse_endpoints("advertised.listeners", a) {
            Ok(a) => a,
            Err(e) => {
                errors.push(e);
                Vec::new()
            }
        },
        None => listeners
            .iter()
            .filter(|l| !controller_names.contains(&l.name))
            .cloned()
            .collect(),
    };
    for a in &advertised {
        if !listeners.iter().any(|l| l.name == a.name) {
            errors.push((
                "advertised.listeners",
                format!(
                    "advertised.listeners listener names must be equal to or a subset of the ones \
                     defined in listeners. Found {}. The valid options based on the current \
                     configuration are {}",
                    a.name,
                    names(&listeners)
                ),
            ));
        }
        if a.host == "0.0.0.0" || a.host == "::" {
            errors.push((
                "advertised.listeners",
                format!(
                    "advertised.listeners cannot use the nonroutable meta-address {}. Use a \
                     routable IP address.",
                    a.host
                ),
            ));
        }
    }
    let client_advertised: Vec<&Endpoint> = advertised
        .iter()
        .filter(|a| !controller_names.contains(&a.name))
        .collect();
    if client_advertised.is_empty() && errors.is_empty() && !keys.controller_only {
        errors.push((
            "advertised.listeners",
            "There must be at least one broker advertised listener".into(),
        ));
    }
    if let Some(ib) = keys.inter_broker.as_ref().filter(|_| !keys.controller_only) {
        let ib = ib.trim().to_ascii_uppercase();
        if !client_advertised.iter().any(|a| a.name == ib) {
            errors.push((
                "inter.broker.listener.name",
                format!(
                    "inter.broker.listener.name must be a listener name defined in \
                     advertised.listeners. The valid options based on currently configured \
                     listeners are {}",
                    client_advertised
                        .iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            ));
        }
    }
    let mut out = Vec::new();
    for l in &listeners {
        let controller = controller_names.contains(&l.name);
        let bind = match bind_addr(&l.host, l.port) {
            Ok(b) => b,
            Err(reason) => {
                errors.push(("listeners", reason));
                continue;
            }
        };
        let advertised = if controller {
            None
        } else {
            client_advertised
                .iter()
                .find(|a| a.name == l.name)
                .map(|a| {
                    let host = if a.host.is_empty() {
                        hostname.to_string()
                    } else {
                        a.host.clone()
                    };
                    (host, a.port)
                })
        };
        out.push(Listener {
            name: l.name.clone(),
            bind,
            advertised,
            controller,
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn names(list: &[Endpoint]) -> String {
    list.iter()
        .map(|e| e.name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// The address to bind for a listener host: empty or `0.0.0.0` = every IPv4 interface, `::` every
/// interface, an IP literal itself, `localhost` 127.0.0.1, any other name its first address.
pub fn bind_addr(host: &str, port: u16) -> Result<SocketAddr, String> {
    if host.is_empty() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
    }
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let mut addrs = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve listener host {host}: {e}"))?;
    addrs
        .next()
        .ok_or_else(|| format!("listener host {host} has no address"))
}

/// The name an empty advertised host stands for: the machine's host name (Kafka uses the
/// canonical host name), `localhost` when it cannot be read.
pub fn local_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".to_string();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..end]) {
        Ok(h) if !h.is_empty() => h.to_string(),
        _ => "localhost".to_string(),
    }
}

#[cfg(test)]
mod tests;
