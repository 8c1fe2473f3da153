//! RFC 8785 conformance against the published cyberphone/json-canonicalization test vectors
//! (`tests/jcs/`, Apache-2.0, see PROVENANCE.txt), plus the number cases the issue names.

use actiond_core::canonical::{canonicalize, parse_strict};
use std::path::Path;

fn dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jcs")
}

#[test]
fn published_vectors_canonicalize_byte_for_byte() {
    let mut checked = 0;
    for entry in std::fs::read_dir(dir().join("input")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_owned();
        let input = std::fs::read(&path).unwrap();
        let expected = std::fs::read(dir().join("output").join(&name)).unwrap();
        // serde_json as the parser (the strict parser refuses 1E30 in values.json on purpose:
        // integral numbers beyond 2^53 must be sent as strings).
        let v: serde_json::Value = serde_json::from_slice(&input).unwrap();
        let got = canonicalize(&v).unwrap();
        assert_eq!(got.as_bytes(), expected.as_slice(), "{name:?}");
        if name != "values.json" {
            assert_eq!(
                canonicalize(&parse_strict(&input).unwrap())
                    .unwrap()
                    .as_bytes(),
                expected.as_slice(),
                "strict {name:?}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 6);
}

#[test]
fn number_serialization_follows_es6() {
    let cases = [
        ("50.0", "50"),
        ("5e1", "50"),
        ("-0.0", "0"),
        ("1e21", "1e+21"),
        ("1E30", "1e+30"),
        ("0.000001", "0.000001"),
        ("1e-7", "1e-7"),
        ("4.50", "4.5"),
        ("2e-3", "0.002"),
        ("333333333.33333329", "333333333.3333333"),
        ("5e-324", "5e-324"),
    ];
    for (input, want) in cases {
        let v: serde_json::Value = serde_json::from_str(input).unwrap();
        assert_eq!(canonicalize(&v).unwrap(), want, "{input}");
    }
}

#[test]
fn strict_parse_refuses_what_jcs_cannot_keep() {
    for bad in [
        r#"{"amount":10,"amount":5000}"#,
        "9007199254740992",
        "1e21",
        r#""\uD800""#,
        r#"{"a":"\uDE00x"}"#,
    ] {
        assert!(parse_strict(bad.as_bytes()).is_err(), "{bad}");
    }
}
