//! Compiles the committed FileDescriptorSet (see gen-fds.py) into Rust; no protoc involved.

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = "p4runtime.fds.bin";
    println!("cargo:rerun-if-changed={path}");
    let bytes = std::fs::read(path)?;
    let fds = prost_types::FileDescriptorSet::decode(bytes.as_slice())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .include_file("p4runtime_includes.rs")
        .compile_fds(fds)?;
    Ok(())
}
