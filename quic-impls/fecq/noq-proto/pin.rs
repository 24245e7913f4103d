//! Empty: this package only pins the noq-proto release fecq patches (Cargo.toml beside it).
