//! Group commit: callers hand in one item each and wait for its answer; a named loop
//! takes whatever items are waiting (up to a batch size) and answers them with one call,
//! usually one database statement. When idle a batch holds one item and adds no delay;
//! under load batches grow, so the database sees a few large writes instead of many
//! small ones.

use std::future::Future;

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// A handle to a batching loop; cheap to clone.
pub struct Batcher<I, O> {
    tx: mpsc::Sender<(I, oneshot::Sender<O>)>,
}

impl<I, O> Clone for Batcher<I, O> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
        }
    }
}

impl<I: Send + 'static, O: Send + 'static> Batcher<I, O> {
    /// Starts the loop `name`: up to `max_batch` items per call of `answer`, at most
    /// `concurrency` calls at once. `answer` returns one output per input, in order.
    /// The loop stops when `shutdown` fires.
    pub fn start<F, Fut>(
        name: &'static str,
        max_batch: usize,
        concurrency: usize,
        shutdown: CancellationToken,
        answer: F,
    ) -> Self
    where
        F: Fn(Vec<I>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<O>> + Send,
    {
        let (tx, rx) = mpsc::channel::<(I, oneshot::Sender<O>)>(8 * max_batch);
        tokio::spawn(async move {
            tokio_stream::wrappers::ReceiverStream::new(rx)
                .take_until(shutdown.cancelled_owned())
                .ready_chunks(max_batch)
                .for_each_concurrent(concurrency, |batch| {
                    let (items, replies): (Vec<I>, Vec<oneshot::Sender<O>>) =
                        batch.into_iter().unzip();
                    let answered = answer(items);
                    async move {
                        for (reply, out) in replies.into_iter().zip(answered.await) {
                            let _ = reply.send(out);
                        }
                    }
                })
                .await;
            tracing::debug!(loop_name = name, "batcher stopped");
        });
        Self { tx }
    }

    /// Hands in one item and waits for its answer; `None` when the loop has stopped.
    pub async fn call(&self, item: I) -> Option<O> {
        let (reply, rx) = oneshot::channel();
        self.tx.send((item, reply)).await.ok()?;
        rx.await.ok()
    }
}
