//! Store tests run on both engines: each test body runs once on a fresh SQLite file and once on
//! a fresh database of a real PostgreSQL cluster (`exitvoice-pgtest`).

/// `async fn name(store: Store) { … }` items become a module `name` with two tests, `sqlite`
/// and `postgres`, each running the body on a fresh store of that engine.
macro_rules! on_both_engines {
    ($($(#[$meta:meta])* async fn $name:ident($store:ident: Store) $body:block)*) => {
        $(
            $(#[$meta])*
            mod $name {
                use super::*;

                async fn run($store: Store) $body

                #[tokio::test]
                async fn sqlite() {
                    let dir = tempfile::tempdir().expect("tempdir");
                    let store = Store::open(&dir.path().join("test.db")).await.expect("open");
                    run(store).await;
                }

                #[tokio::test]
                async fn postgres() {
                    let url = exitvoice_pgtest::fresh_database(stringify!($name));
                    let database = url.parse().expect("a postgres URL");
                    let store = Store::connect(&database).await.expect("connect");
                    run(store).await;
                }
            }
        )*
    };
}
