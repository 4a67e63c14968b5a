//! The intent loader on any text: an error with a location, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = weft_topology::load_str(text, "fuzz.yaml");
    }
});
