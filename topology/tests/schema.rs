//! The committed JSON Schema must be the one the model generates (regenerate: WEFT_REGEN=1).

#[test]
fn committed_schema_matches_the_model() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/intent.schema.json");
    let fresh =
        serde_json::to_string_pretty(weft_topology::schema()).expect("schema serialises") + "\n";
    if std::env::var_os("WEFT_REGEN").is_some() {
        std::fs::write(path, &fresh).expect("write schema");
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == fresh,
        "topology/intent.schema.json is stale: run `WEFT_REGEN=1 cargo test -p weft-topology --test schema`"
    );
}
