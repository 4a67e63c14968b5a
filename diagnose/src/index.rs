//! Lookups on a [`Fabric`] that a fabric of 5,120 switches and 65,536 hosts cannot afford as
//! scans: the far end of a cable, whether a node is a host, the leaf port of a host. Built once
//! per fabric on first use and kept beside it; a fabric whose cable or host count changed
//! since is looked up by scanning, as before (correct, only slower).

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use crate::deltas::{Fast, FastMap};
use crate::{End, Fabric};

#[derive(Debug)]
pub(crate) struct FabricIndex {
    /// What the index was built over.
    links: usize,
    hosts: usize,
    /// End → (link index, true when the end is the link's `a`).
    ends: FastMap<End, (usize, bool)>,
    host_set: HashSet<String, Fast>,
    /// Host → index of its cable.
    host_link: FastMap<String, usize>,
}

/// The cache a [`Fabric`] carries: not serialised, not compared, emptied by a clone.
#[derive(Default)]
pub struct IndexCache(OnceLock<Arc<FabricIndex>>);

impl std::fmt::Debug for IndexCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IndexCache")
    }
}

impl Clone for IndexCache {
    fn clone(&self) -> Self {
        // The clone may be changed before its first lookup: it builds its own.
        IndexCache::default()
    }
}

impl PartialEq for IndexCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl FabricIndex {
    fn build(f: &Fabric) -> FabricIndex {
        let host_set: HashSet<String, Fast> = f.hosts.iter().cloned().collect();
        let mut ends = FastMap::with_capacity_and_hasher(f.links.len() * 2, Fast::default());
        let mut host_link = FastMap::with_capacity_and_hasher(f.hosts.len(), Fast::default());
        for (i, l) in f.links.iter().enumerate() {
            // The first cable wins, as a scan finds it.
            ends.entry(l.a.clone()).or_insert((i, true));
            ends.entry(l.b.clone()).or_insert((i, false));
            for e in [&l.a, &l.b] {
                if host_set.contains(&e.node) {
                    host_link.entry(e.node.clone()).or_insert(i);
                }
            }
        }
        FabricIndex {
            links: f.links.len(),
            hosts: f.hosts.len(),
            ends,
            host_set,
            host_link,
        }
    }
}

/// The index of `f`, if it still describes `f`.
pub(crate) fn of(f: &Fabric) -> Option<&FabricIndex> {
    let ix = f.index.0.get_or_init(|| Arc::new(FabricIndex::build(f)));
    (ix.links == f.links.len() && ix.hosts == f.hosts.len()).then_some(&**ix)
}

impl FabricIndex {
    pub(crate) fn peer<'f>(&self, f: &'f Fabric, e: &End) -> Option<&'f End> {
        let (i, is_a) = *self.ends.get(e)?;
        let l = f.links.get(i)?;
        Some(if is_a { &l.b } else { &l.a })
    }
    pub(crate) fn is_host(&self, node: &str) -> bool {
        self.host_set.contains(node)
    }
    pub(crate) fn host_port(&self, f: &Fabric, host: &str) -> Option<End> {
        let l = f.links.get(*self.host_link.get(host)?)?;
        Some(if l.a.node == host {
            l.b.clone()
        } else {
            l.a.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{End, Fabric, Link};

    fn small() -> Fabric {
        Fabric {
            switches: vec!["leaf1".into(), "spine1".into()],
            hosts: vec!["h1".into()],
            links: vec![
                Link {
                    a: End::new("leaf1", "Ethernet8"),
                    b: End::new("spine1", "Ethernet0"),
                },
                Link {
                    a: End::new("h1", "eth0"),
                    b: End::new("leaf1", "Ethernet0"),
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn indexed_lookups_answer_as_the_scans_do() {
        let f = small();
        assert_eq!(
            f.peer(&End::new("spine1", "Ethernet0")),
            Some(&End::new("leaf1", "Ethernet8"))
        );
        assert_eq!(
            f.peer(&End::new("leaf1", "Ethernet0")),
            Some(&End::new("h1", "eth0"))
        );
        assert_eq!(f.peer(&End::new("leaf1", "Ethernet4")), None);
        assert!(f.is_host("h1") && !f.is_host("leaf1"));
        assert_eq!(f.host_port("h1"), Some(End::new("leaf1", "Ethernet0")));
        assert_eq!(f.host_port("leaf1"), None);
    }

    #[test]
    fn a_fabric_changed_after_its_first_lookup_is_still_answered_right() {
        let mut f = small();
        assert!(f.peer(&End::new("leaf1", "Ethernet8")).is_some());
        f.hosts.push("h2".into());
        f.links.push(Link {
            a: End::new("leaf1", "Ethernet4"),
            b: End::new("h2", "eth0"),
        });
        assert_eq!(
            f.peer(&End::new("leaf1", "Ethernet4")),
            Some(&End::new("h2", "eth0"))
        );
        assert_eq!(f.host_port("h2"), Some(End::new("leaf1", "Ethernet4")));
        assert!(f.is_host("h2"));
        let g = f.clone();
        assert_eq!(g.host_port("h2"), Some(End::new("leaf1", "Ethernet4")));
    }
}
