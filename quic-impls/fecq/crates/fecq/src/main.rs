fn main() {
    std::process::exit(fecq::cli::main());
}
