//! Server reflection as clients use it (grpcurl, Python's grpcio-reflection): both
//! protocol versions, v1 and v1alpha, list every served service and return the file
//! that defines a symbol.

use prost::Message;
use prost_types::FileDescriptorProto;
use taskwire_e2e::start;
use taskwire_test_support::ScriptedModel;
use tonic::transport::{Channel, Endpoint};

/// Every service the coordinator serves, sorted.
const SERVED: [&str; 4] = [
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
    "taskwire.v1.TaskService",
];

/// A client of one reflection version: the two have the same messages in different
/// packages.
macro_rules! reflection_client {
    ($version:ident) => {
        mod $version {
            use tonic::transport::Channel;
            use tonic_reflection::pb::$version::ServerReflectionRequest;
            use tonic_reflection::pb::$version::server_reflection_client::ServerReflectionClient;
            use tonic_reflection::pb::$version::server_reflection_request::MessageRequest;
            use tonic_reflection::pb::$version::server_reflection_response::MessageResponse;

            async fn ask(channel: Channel, request: MessageRequest) -> MessageResponse {
                let request = ServerReflectionRequest {
                    host: String::new(),
                    message_request: Some(request),
                };
                let mut responses = ServerReflectionClient::new(channel)
                    .server_reflection_info(futures::stream::iter([request]))
                    .await
                    .expect("reflection call")
                    .into_inner();
                responses
                    .message()
                    .await
                    .expect("a reflection response")
                    .expect("one response per request")
                    .message_response
                    .expect("a response body")
            }

            /// The listed service names, sorted.
            pub async fn services(channel: Channel) -> Vec<String> {
                match ask(channel, MessageRequest::ListServices(String::new())).await {
                    MessageResponse::ListServicesResponse(list) => {
                        let mut names: Vec<String> =
                            list.service.into_iter().map(|s| s.name).collect();
                        names.sort();
                        names
                    }
                    other => panic!("expected a service list, got {other:?}"),
                }
            }

            /// The encoded files returned for `symbol`.
            pub async fn file_containing(channel: Channel, symbol: &str) -> Vec<Vec<u8>> {
                let request = MessageRequest::FileContainingSymbol(symbol.to_owned());
                match ask(channel, request).await {
                    MessageResponse::FileDescriptorResponse(files) => files.file_descriptor_proto,
                    other => panic!("expected files for {symbol}, got {other:?}"),
                }
            }
        }
    };
}

reflection_client!(v1);
reflection_client!(v1alpha);

/// Whether one of `files` defines service `name` in `package`.
fn defines_service(files: &[Vec<u8>], package: &str, name: &str) -> bool {
    files.iter().any(|bytes| {
        let file = FileDescriptorProto::decode(bytes.as_slice()).expect("a file descriptor");
        file.package() == package && file.service.iter().any(|s| s.name() == name)
    })
}

async fn channel(url: String) -> Channel {
    Endpoint::from_shared(url)
        .expect("valid url")
        .connect()
        .await
        .expect("connect")
}

#[tokio::test]
async fn reflection_v1_and_v1alpha_list_every_service_and_resolve_symbols() {
    let cluster = start(ScriptedModel::echo().await, 0, 1)
        .await
        .expect("cluster");
    let channel = channel(cluster.url()).await;

    assert_eq!(v1::services(channel.clone()).await, SERVED);
    assert_eq!(v1alpha::services(channel.clone()).await, SERVED);

    for (package, service) in [("grpc.health.v1", "Health"), ("taskwire.v1", "TaskService")] {
        let symbol = format!("{package}.{service}");
        let files = v1::file_containing(channel.clone(), &symbol).await;
        assert!(defines_service(&files, package, service), "v1, {symbol}");
        let files = v1alpha::file_containing(channel.clone(), &symbol).await;
        assert!(
            defines_service(&files, package, service),
            "v1alpha, {symbol}"
        );
    }
    cluster.shutdown().await;
}
