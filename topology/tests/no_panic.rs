//! No input may panic the loader: mutate valid examples at random and feed the results through.

use proptest::prelude::*;

const EXAMPLE: &str = include_str!("../examples/leaf-spine-small.yaml");
const BAD: &str = include_str!("../../tests/invalid/19-link-speed-mismatch.yaml");

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn mutated_intents_never_panic(cut in 0usize..2000, insert in "[ -~\\n\\t:{}\\[\\]-]{0,12}", which in 0usize..2) {
        let base = if which == 0 { EXAMPLE } else { BAD };
        let mut cut = cut.min(base.len());
        while !base.is_char_boundary(cut) {
            cut -= 1;
        }
        let text = format!("{}{}{}", &base[..cut], insert, &base[cut..]);
        let _ = weft_topology::load_str(&text, "fuzz.yaml");
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = weft_topology::load_str(&text, "fuzz.yaml");
    }
}
