//! A future polled only after it asked to be. `select!` polls every branch on every wake of
//! its task; a connection's task wakes for each read and write, while its deadline timer and
//! the shutdown watch wake it only when they fire. Wrapped in [`Woken`], each of those is
//! polled when its own waker was called (and once at the start), and otherwise costs the
//! task a flag read and a waker check.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// The wrapped future's waker: notes the wake and passes it on to the task.
#[derive(Debug, Default)]
struct Flag {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// `F`, polled only when its own waker was called since its last poll.
pub(crate) struct Woken<F> {
    inner: Pin<Box<F>>,
    flag: Arc<Flag>,
    /// The waker `inner` is polled with (made once).
    waker: Waker,
}

impl<F: Future> Woken<F> {
    pub(crate) fn new(inner: F) -> Self {
        let flag = Arc::new(Flag {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        Self {
            inner: Box::pin(inner),
            waker: Waker::from(Arc::clone(&flag)),
            flag,
        }
    }
}

impl<F: Future> Future for Woken<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        // Registered before the flag is read: a wake after the read reaches this task.
        this.flag.task.register(cx.waker());
        if !this.flag.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        this.inner
            .as_mut()
            .poll(&mut Context::from_waker(&this.waker))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;

    /// Counts its polls, then is ready at its deadline.
    struct Counted<'a> {
        polls: &'a AtomicUsize,
        sleep: Pin<Box<tokio::time::Sleep>>,
    }

    impl Future for Counted<'_> {
        type Output = ();

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            self.sleep.as_mut().poll(cx)
        }
    }

    /// The task wakes 50 times for a channel, the wrapped timer only at its deadline: it is
    /// polled at the start and when it fires, and still ends the wait on time.
    #[tokio::test(start_paused = true)]
    async fn the_inner_future_is_polled_only_when_it_was_woken() {
        let polls = AtomicUsize::new(0);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            for i in 0..50 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                let _ = tx.send(i);
            }
        });
        let mut timer = std::pin::pin!(Woken::new(Counted {
            polls: &polls,
            sleep: Box::pin(tokio::time::sleep(Duration::from_secs(1))),
        }));
        let mut received = 0;
        loop {
            tokio::select! {
                biased;
                Some(_) = rx.recv() => received += 1,
                () = timer.as_mut() => break,
            }
        }
        assert_eq!(received, 50);
        assert_eq!(polls.load(Ordering::Relaxed), 2);
    }
}
