//! The names of what a testbed makes: namespaces, interfaces, its state directory, and where a
//! switch's Redis listens (from the intent's `db`).

use std::path::{Path, PathBuf};

/// The fabric's namespace (BMv2, plugins, switch ports). Names never contain `:`, so
/// `weft-<fabric>:…` belongs to exactly one fabric: a fabric `a` and a fabric `a-b` cannot
/// claim each other's namespaces.
pub fn fabric_netns(fabric: &str) -> String {
    format!("weft-{fabric}")
}

/// A host's namespace.
pub fn host_netns(fabric: &str, host: &str) -> String {
    format!("{}:{host}", fabric_netns(fabric))
}

/// The namespace the cables run through. Host names start with a letter or digit, so no host
/// namespace can be called this.
pub fn wires_netns(fabric: &str) -> String {
    format!("{}:_wires", fabric_netns(fabric))
}

/// A switch port's interface in the fabric namespace: `s<device id>p<port id>`, at most 15
/// characters (Linux's limit) for 32-bit device ids and port ids up to 510.
pub(crate) fn iface(device_id: u64, port_id: u32) -> String {
    format!("s{device_id}p{port_id}")
}

/// The default state directory of a fabric.
pub fn default_state_dir(fabric: &str) -> PathBuf {
    PathBuf::from("/run/weft/testbed").join(fabric)
}

/// The socket of a `unix://` or plain-path DB endpoint.
pub(crate) fn unix_path(db: &str) -> Option<PathBuf> {
    db.strip_prefix("unix://")
        .map(PathBuf::from)
        .or_else(|| db.starts_with('/').then(|| PathBuf::from(db)))
}

/// The port of a `redis://HOST:PORT[/DB]` endpoint.
pub(crate) fn tcp_port(db: &str) -> Option<u16> {
    db.strip_prefix("redis://")?
        .trim_end_matches('/')
        .rsplit(':')
        .next()?
        .split('/')
        .next()?
        .parse()
        .ok()
}

pub(crate) fn netns_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fabric_owns_its_namespace_and_every_namespace_under_it() {
        assert_eq!(fabric_netns("lab"), "weft-lab");
        assert_eq!(host_netns("lab", "h1"), "weft-lab:h1");
        assert_eq!(wires_netns("lab"), "weft-lab:_wires");
        assert!(!host_netns("lab-b", "h1").starts_with(&format!("{}:", fabric_netns("lab"))));
        assert_eq!(default_state_dir("lab"), Path::new("/run/weft/testbed/lab"));
    }

    #[test]
    fn the_longest_interface_name_fits_linux() {
        assert_eq!(iface(3, 12), "s3p12");
        assert_eq!(iface(u64::from(u32::MAX), 510).len(), 15);
    }

    #[test]
    fn redis_listens_on_the_socket_or_port_of_the_db_endpoint() {
        assert_eq!(
            unix_path("unix:///run/weft/l1/redis.sock"),
            Some(PathBuf::from("/run/weft/l1/redis.sock"))
        );
        assert_eq!(unix_path("/run/r.sock"), Some(PathBuf::from("/run/r.sock")));
        assert_eq!(unix_path("redis://127.0.0.1:6379"), None);
        assert_eq!(tcp_port("redis://127.0.0.1:6390"), Some(6390));
        assert_eq!(tcp_port("redis://127.0.0.1:6390/"), Some(6390));
        assert_eq!(tcp_port("redis://u:p@127.0.0.1:6390/0"), Some(6390));
        assert_eq!(tcp_port("unix:///r.sock"), None);
    }
}
