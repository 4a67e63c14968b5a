//! The intent of a twin's fabric: a fat-tree of radix k, each switch's DB on one of a few
//! redis-servers (`?db_base=` apart, 16 databases per switch), as an operator would write it.

use weft_topology::Role;

use crate::TwinError;

fn base(k: u32, name: &str) -> String {
    format!(
        "fabric:\n  name: {name}\ngenerators:\n  - {{kind: fat-tree, k: {k}}}\nrouting:\n  default: {{mode: wcmp}}\n"
    )
}

fn role(r: Role) -> &'static str {
    match r {
        Role::Leaf => "leaf",
        Role::Spine => "spine",
        Role::Superspine => "superspine",
    }
}

/// The switches of a fat-tree of radix `k` (names, in the generator's order).
pub fn switches(k: u32) -> Result<Vec<(String, Role)>, TwinError> {
    let t = weft_topology::load_str(&base(k, "twin"), "twin.yaml")
        .map_err(|e| TwinError::Model(e.to_string()))?;
    Ok(t.switches
        .iter()
        .map(|s| (s.name.clone(), s.role))
        .collect())
}

/// Switch `i` of `n` spread over `servers` (their endpoints): its endpoint with `db_base`.
pub fn spread(i: usize, n: usize, servers: &[String]) -> String {
    let per = n.div_ceil(servers.len().max(1)).max(1);
    let srv = &servers[(i / per).min(servers.len().saturating_sub(1))];
    let slot = (i % per) * 16;
    if slot == 0 {
        srv.clone()
    } else {
        let sep = if srv.contains('?') { '&' } else { '?' };
        format!("{srv}{sep}db_base={slot}")
    }
}

/// How many databases a server needs for `n` switches over `servers` servers.
pub fn databases(n: usize, servers: usize) -> u32 {
    (n.div_ceil(servers.max(1)) * 16).max(16) as u32
}

/// The intent text: a fat-tree of radix `k` named `name`, switch `i`'s DB at `db(i)`.
pub fn fat_tree(k: u32, name: &str, db: impl Fn(usize) -> String) -> Result<String, TwinError> {
    let mut text = base(k, name);
    text.push_str("switches:\n");
    for (i, (n, r)) in switches(k)?.iter().enumerate() {
        text.push_str(&format!(
            "  - {{name: {n}, role: {}, db: \"{}\"}}\n",
            role(*r),
            db(i)
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_spread_over_servers_in_blocks_of_16_databases() {
        let s = vec!["unix:///a.sock".to_string(), "unix:///b.sock".to_string()];
        assert_eq!(spread(0, 20, &s), "unix:///a.sock");
        assert_eq!(spread(1, 20, &s), "unix:///a.sock?db_base=16");
        assert_eq!(spread(10, 20, &s), "unix:///b.sock");
        assert_eq!(spread(19, 20, &s), "unix:///b.sock?db_base=144");
        assert_eq!(databases(20, 2), 160);
        let text = fat_tree(4, "t4", |i| spread(i, 20, &s)).expect("intent");
        let t = weft_topology::load_str(&text, "t4.yaml").expect("valid");
        assert_eq!(t.switches.len(), 20);
        assert_eq!(t.switches[19].db, "unix:///b.sock?db_base=144");
    }
}
