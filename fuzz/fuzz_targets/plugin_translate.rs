//! The plugin's translation of an APPL_DB entry (key on the first line, field=value lines) to
//! P4Runtime objects: a malicious entry gets an error (`Rejected`), never a panic; an entry
//! that translates names a table of the pipeline.
#![no_main]
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use weft_sonic_plugin::translate::Translator;

static TRANSLATOR: LazyLock<Translator> = LazyLock::new(|| {
    let info = weft_sonic_plugin::pipeline::weft_p4info().expect("Weft's P4Info");
    let mut t = Translator::new(info, weft_sonic_plugin::pipeline::owned_tables(), true);
    let mut ports = weft_appdb::PortMap::default();
    for i in 0..8u32 {
        ports.by_name.insert(format!("Ethernet{}", i * 4), i + 1);
    }
    t.set_ports(ports);
    t
});

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.split('\n');
    let key = lines.next().unwrap_or_default();
    let fields: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once('='))
        .map(|(f, v)| (f.to_string(), v.to_string()))
        .collect();
    let _ = TRANSLATOR.translate_with_refs(key, &fields);
});
