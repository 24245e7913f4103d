//! IO-free packet-level forward erasure correction for fecq.
