//! The P4RT_TABLE key and field decoder: a key (first line) and field=value lines. Never a
//! panic; what decodes, encodes back to a key that decodes to the same thing.
#![no_main]
use libfuzzer_sys::fuzz_target;
use weft_sonic_db::{P4rtEntry, P4rtKey};

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
    let _ = P4rtKey::parse_db_key(key);
    if let Ok(k) = P4rtKey::parse_table_key(key) {
        let again = P4rtKey::parse_table_key(&k.to_table_key());
        assert_eq!(again.as_ref().ok(), Some(&k), "key {key:?} does not round-trip");
        let _ = P4rtEntry::from_fields(k, &fields);
    }
});
