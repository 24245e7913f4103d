// fecbench's endpoints for rQUIC (quic-impls/rquic/README.md): a module of ours built against rQUIC's
// quic-go fork at the commit build.sh pins. build.sh copies this folder to build/endpoint/, beside the
// unpacked, checked rQUIC tree in build/src/ (hence the relative path of the replace), and takes go.sum
// from that tree: every module is verified by the repository's own go.sum.
module fecbench/rquic-endpoint

go 1.15

require github.com/lucas-clemente/quic-go v0.0.0-00010101000000-000000000000

replace github.com/lucas-clemente/quic-go => ../src
