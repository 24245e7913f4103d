//! `cargo run --release -p fec-core --example bench`: print fec-core's throughput figures.
use fec_core::{bench, Scheme};

fn main() {
    let schemes: Vec<Scheme> = ["none", "xor:5", "xor:5:4", "rs:30,20", "rlc:3,2,20"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    println!(
        "{:<11} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>8} {:>9} {:>5}",
        "scheme",
        "enc MB/s",
        "dec MB/s",
        "dir enc",
        "dir dec",
        "r enc",
        "r dec",
        "ns/dgram",
        "recovered",
        "same"
    );
    for b in bench::run(&schemes, 20_000, 10, 5) {
        let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let ratio = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        println!(
            "{:<11} {:>9.0} {:>9.0} {:>9} {:>9} {:>6} {:>6} {:>8.0} {:>5}/{} {:>5}",
            b.scheme,
            b.encode_mb_s,
            b.decode_mb_s,
            opt(b.direct_encode_mb_s),
            opt(b.direct_decode_mb_s),
            ratio(b.encode_ratio()),
            ratio(b.decode_ratio()),
            b.layer_ns_per_datagram,
            b.recovered,
            b.lost,
            b.direct_same_output
                .map_or("-".to_string(), |s| s.to_string())
        );
    }
}
