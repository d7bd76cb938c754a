//! Compiles `proto/taskwire/v1/*.proto` with protox (pure Rust: no protoc needed) and
//! writes the file descriptor set for gRPC reflection.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read at run time, not baked in with `env!`: cargo may reuse a build script
    // compiled in another checkout of the workspace, which would read that one's protos.
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let files = [
        "taskwire/v1/envelope.proto",
        "taskwire/v1/task_service.proto",
        "taskwire/v1/worker_rpc.proto",
    ];
    for file in &files {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let mut compiler = protox::Compiler::new([&root])?;
    compiler.include_imports(true);
    compiler.open_files(files)?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("taskwire_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;
    // Only the gRPC edge (coordinator, CLI) needs the service code; the store and the
    // agent side use the messages alone and so stay free of tonic.
    let grpc = std::env::var_os("CARGO_FEATURE_GRPC").is_some();
    // BTreeMap keeps `Struct` fields ordered, so an encoded request is deterministic
    // (its digest decides idempotent-submit conflicts).
    tonic_prost_build::configure()
        .btree_map(".")
        .build_client(grpc)
        .build_server(grpc)
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
