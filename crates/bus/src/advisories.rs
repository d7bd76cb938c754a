//! JetStream's max-deliveries advisories for the tasks stream: [`MaxDeliveries`], kept
//! in the advisories stream until a coordinator has handled one, and the message it
//! advises about, read and deleted by sequence.

use bytes::Bytes;

use crate::Bus;
use crate::consumer::Incoming;
use crate::error::{BusError, CodecError};

/// A message was delivered `deliveries` times without being settled (the consumer's
/// max deliveries): JetStream no longer offers it, and it stays in its WorkQueue
/// stream unless deleted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct MaxDeliveries {
    pub stream: String,
    pub stream_seq: u64,
    pub deliveries: u64,
}

/// The advisory is JSON written by the server, not an envelope of the codec.
impl Incoming for MaxDeliveries {
    fn read(_subject: &str, payload: &[u8]) -> Result<Self, CodecError> {
        serde_json::from_slice(payload).map_err(|e| CodecError {
            envelope: "max-deliveries advisory",
            field: None,
            reason: e.to_string(),
        })
    }
}

/// A message as a stream stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    pub subject: String,
    pub payload: Bytes,
}

impl Bus {
    /// The message `advisory` is about; `None` when it is gone (settled or deleted
    /// meanwhile). An error when its stream cannot be read now.
    pub async fn advised_message(
        &self,
        advisory: &MaxDeliveries,
    ) -> Result<Option<StoredMessage>, BusError> {
        let stream =
            self.js()
                .get_stream(&advisory.stream)
                .await
                .map_err(|e| BusError::Request {
                    action: format!("read stream {}", advisory.stream),
                    reason: e.to_string(),
                })?;
        match stream.get_raw_message(advisory.stream_seq).await {
            Ok(m) => Ok(Some(StoredMessage {
                subject: m.subject.to_string(),
                payload: m.payload,
            })),
            Err(error) => {
                tracing::debug!(%error, seq = advisory.stream_seq, "advised message is gone");
                Ok(None)
            }
        }
    }

    /// Deletes the message `advisory` is about from its stream.
    pub async fn delete_advised(&self, advisory: &MaxDeliveries) -> Result<(), BusError> {
        let fail = |reason: String| BusError::Request {
            action: format!(
                "delete message {} of stream {}",
                advisory.stream_seq, advisory.stream
            ),
            reason,
        };
        self.js()
            .get_stream_no_info(&advisory.stream)
            .await
            .map_err(|e| fail(e.to_string()))?
            .delete_message(advisory.stream_seq)
            .await
            .map(drop)
            .map_err(|e| fail(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_advisory_is_read_from_the_servers_json() {
        let json = br#"{"type":"io.nats.jetstream.advisory.v1.max_deliver","stream":"TASKWIRE_TASKS","consumer":"workers-default","stream_seq":42,"deliveries":100}"#;
        assert_eq!(
            MaxDeliveries::read("$JS.EVENT.ADVISORY", json).expect("reads"),
            MaxDeliveries {
                stream: "TASKWIRE_TASKS".into(),
                stream_seq: 42,
                deliveries: 100,
            }
        );
        let e = MaxDeliveries::read("$JS.EVENT.ADVISORY", b"{").expect_err("malformed");
        assert!(
            e.to_string()
                .starts_with("malformed max-deliveries advisory"),
            "{e}"
        );
    }
}
