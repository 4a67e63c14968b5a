//! Random names through the loader: it never panics, every name of an accepted intent follows the
//! name rule, an intent with a name that breaks it is refused, and one whose names all follow it
//! (and differ) is accepted.

use proptest::prelude::*;
use weft_topology::{check_name, load_str};

fn nasty() -> impl Strategy<Value = String> {
    prop_oneof![
        // Mostly valid names of every length around the limit, some with a bad first character.
        "[a-zA-Z0-9_.-]{0,70}",
        // Anything printable or not, Unicode included.
        "\\PC{0,20}",
        "[ -~\\t\\n\\r\\u{0}\\u{7f}\\u{200b}\\u{feff}é🚀]{0,12}",
        prop::sample::select(vec![
            String::new(),
            ".".into(),
            "..".into(),
            "../../etc".into(),
            "h1/../x".into(),
            "a\nb".into(),
            "a\tb".into(),
            "a\0b".into(),
            "🚀".into(),
            "x".repeat(300),
            "-rf".into(),
            "a|b".into(),
            "a:b".into(),
            "a b".into(),
            "x".repeat(63),
            "x".repeat(64),
        ]),
    ]
}

/// A YAML double-quoted scalar holding exactly `s` (JSON's escapes are YAML's).
fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn intent(fabric: &str, switch: &str, host: &str, class: &str) -> String {
    format!(
        "fabric:\n  name: {f}\nswitches:\n  - {{name: spine1, role: spine, ports: [{{name: Ethernet0}}]}}\n  - {{name: {s}, role: leaf, ports: [{{name: Ethernet0}}, {{name: Ethernet4}}, {{name: Ethernet8}}]}}\nlinks:\n  - {{a: {s8}, b: spine1:Ethernet0}}\nhosts:\n  - {{name: {h}, attach: {s0}}}\n  - {{name: hfixed, attach: {s4}}}\nqos:\n  classes:\n    - {{name: {c}, dscp: [26], traffic_class: 3, lossless: true}}\n    - {{name: rest, dscp: default, traffic_class: 0}}\n",
        f = q(fabric),
        s = q(switch),
        s0 = q(&format!("{switch}:Ethernet0")),
        s4 = q(&format!("{switch}:Ethernet4")),
        s8 = q(&format!("{switch}:Ethernet8")),
        h = q(host),
        c = q(class),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn every_name_is_either_refused_or_follows_the_rule(
        fabric in nasty(),
        switch in nasty(),
        host in nasty(),
        class in nasty(),
    ) {
        let text = intent(&fabric, &switch, &host, &class);
        let result = load_str(&text, "names.yaml");
        let written = [&fabric, &switch, &host, &class];
        match &result {
            Ok(t) => {
                prop_assert!(check_name(&t.name).is_ok(), "fabric {:?}", t.name);
                for s in &t.switches {
                    prop_assert!(check_name(&s.name).is_ok(), "switch {:?}", s.name);
                    for p in &s.ports {
                        prop_assert!(check_name(&p.name).is_ok(), "port {:?}", p.name);
                    }
                }
                for h in &t.hosts {
                    prop_assert!(check_name(&h.name).is_ok(), "host {:?}", h.name);
                }
                for c in &t.qos.classes {
                    prop_assert!(check_name(&c.name).is_ok(), "class {:?}", c.name);
                }
            }
            Err(e) => {
                // Refusing is right when some name breaks the rule, or two of them collide.
                let bad = written.iter().any(|n| check_name(n).is_err());
                let lower = |s: &str| s.to_ascii_lowercase();
                let collide = switch == "spine1"
                    || host == "hfixed"
                    || host == switch
                    || host == "spine1"
                    || switch == "hfixed"
                    || lower(&class) == "rest";
                prop_assert!(bad || collide, "all names valid and distinct, yet refused: {e:?}\n{text}");
            }
        }
        if written.iter().any(|n| check_name(n).is_err()) {
            prop_assert!(result.is_err(), "a name breaking the rule was accepted:\n{text}");
        }
    }
}
