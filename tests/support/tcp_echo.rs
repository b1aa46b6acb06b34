//! A TCP echo target on loopback: what comes in goes back, on the caller's runtime.

/// Binds a loopback port that echoes every byte, served on the current runtime: its port.
pub async fn listener() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = socket.split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
    port
}

/// [`listener`], served on `runtime`.
pub fn on(runtime: &tokio::runtime::Runtime) -> u16 {
    runtime.block_on(listener())
}
