//! What a click on a link or a switch opens: its state, its current rates and the last minutes
//! of them (the page's [`History`](crate::history::History)), as JSON.

use serde::Serialize;
use serde_json::{Value, json};
use weft_observe::read::SwitchRead;

use crate::history::Series;
use crate::page::Page;
use crate::rates::SwitchRates;

fn read_word<T>(r: Option<&SwitchRead<T>>) -> String {
    match r {
        Some(SwitchRead::Ok(_)) => "read".into(),
        Some(SwitchRead::NoData) => "no data".into(),
        Some(SwitchRead::Stale { why, .. }) => format!("stale: {why}"),
        Some(SwitchRead::Unreachable(e)) => format!("unreachable: {e}"),
        None => "not read yet".into(),
    }
}

fn end_up(p: &Page, sw: usize, port: usize) -> Option<bool> {
    p.ports.get(sw)?.data()?.get(port).copied().flatten()
}

fn series(s: Series, names: &[&str]) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("t".into(), json!(s.t));
    for (n, v) in names.iter().zip(s.values) {
        m.insert((*n).into(), json!(v));
    }
    Value::Object(m)
}

fn rates(r: Option<&SwitchRates>) -> Value {
    match r {
        Some(r) => json!(r.to_value()),
        None => Value::Null,
    }
}

impl SwitchRates {
    fn to_value(&self) -> Value {
        json!({
            "rx_bps": self.rx_bps, "tx_bps": self.tx_bps, "ecn": self.ecn,
            "pause_rx": self.pause_rx, "pause_tx": self.pause_tx, "drops": self.drops,
        })
    }
}

#[derive(Serialize)]
struct End {
    switch: String,
    port: String,
    /// STATE_DB: up, down, or null (not known).
    up: Option<bool>,
}

/// Link `i` of the layout, or `None` when there is no such link.
pub fn link(p: &Page, t: &weft_topology::Topology, i: usize) -> Option<Value> {
    let k = p.layout.links.get(i)?;
    let frame = p.last.as_ref();
    let sw_a = &t.switches[k.a];
    let mut ends = vec![End {
        switch: sw_a.name.clone(),
        port: sw_a.ports[k.ap].name.clone(),
        up: end_up(p, k.a, k.ap),
    }];
    let far = if k.host {
        t.hosts[k.b].name.clone()
    } else {
        let sw_b = &t.switches[k.b];
        ends.push(End {
            switch: sw_b.name.clone(),
            port: sw_b.ports[k.bp].name.clone(),
            up: end_up(p, k.b, k.bp),
        });
        sw_b.name.clone()
    };
    let r = p.link_rates.get(i).copied().unwrap_or_default();
    let drops = |sw: usize| {
        p.switch_rates
            .get(sw)
            .and_then(|x| x.as_ref())
            .map(|x| json!(x.drops))
    };
    Some(json!({
        "index": i,
        "name": k.name,
        "kind": if k.host { "host" } else { "fabric" },
        "gbps": k.gbps,
        "from": sw_a.name, "to": far,
        "state": frame.and_then(|f| f.ls.as_bytes().get(i)).map(|c| (*c as char).to_string()),
        "utilisation": r.utilisation(k.gbps),
        "ends": ends,
        "now": {"ab_bps": r.ab_bps, "ba_bps": r.ba_bps, "ecn": r.ecn, "pause": r.pause, "storm": r.storm},
        "drops": {"a": drops(k.a), "b": if k.host { None } else { drops(k.b) }},
        // Null without a trim counter at either end: said, not shown as zero.
        "trimmed": r.trimmed,
        "interval_s": frame.map(|f| f.interval_s),
        "series": series(p.history.link(i), &["ab_bps", "ba_bps", "ecn", "pause"]),
    }))
}

/// Switch `i`, or `None` when there is no such switch.
pub fn switch(p: &Page, t: &weft_topology::Topology, i: usize) -> Option<Value> {
    let s = t.switches.get(i)?;
    let frame = p.last.as_ref();
    let links: Vec<Value> = p
        .layout
        .links
        .iter()
        .enumerate()
        .filter(|(_, k)| k.a == i || (!k.host && k.b == i))
        .map(|(li, k)| {
            let port = if k.a == i { k.ap } else { k.bp };
            json!({
                "link": li,
                "port": s.ports[port].name,
                "name": k.name,
                "up": end_up(p, i, port),
                "state": frame.and_then(|f| f.ls.as_bytes().get(li)).map(|c| (*c as char).to_string()),
                "utilisation": frame.and_then(|f| f.lu.get(li)).copied(),
            })
        })
        .collect();
    let plugin = match p.plugins.get(i).and_then(|x| x.data()) {
        Some(pl) => json!({
            "state": pl.state, "pid": pl.pid, "uptime_s": pl.uptime_s,
            "pending_keys": pl.pending_keys, "updated_ms": pl.updated_ms,
        }),
        None => Value::Null,
    };
    Some(json!({
        "index": i,
        "name": s.name,
        "role": s.role.as_str(),
        "db": s.db,
        "state": frame.and_then(|f| f.sw.as_bytes().get(i)).map(|c| (*c as char).to_string()),
        "why": frame.and_then(|f| f.why.get(&i)),
        "plugin_read": read_word(p.plugins.get(i)),
        "ports_read": read_word(p.ports.get(i)),
        "counters": frame.and_then(|f| f.cn.as_bytes().get(i)).map(|c| (*c as char).to_string()),
        "plugin": plugin,
        "now": rates(p.switch_rates.get(i).and_then(|x| x.as_ref())),
        "links": links,
        "series": series(p.history.switch(i), &["rx_bps", "tx_bps", "ecn", "pause", "drops"]),
    }))
}
