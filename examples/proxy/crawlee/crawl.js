// A crawlee crawl behind exitvoice's broker proxy: one task, so one exit, per crawlee session.
//
//   cd examples/proxy/crawlee && npm ci
//   EXITVOICE_PROXY=127.0.0.1:8491 EXITVOICE_BROKER_TOKEN=… node crawl.js URL [URL…]
//
// crawlee asks `newUrlFunction` for a proxy URL per session (its cookies and its retries). The
// URL's user name names a task after the session (`class-identity-task-crawlee_<session>`;
// another class with EXITVOICE_CLASS=anonymous or stateless), and its password is the broker
// token: every request of a session rides the task's one lease and leaves from one exit, and a
// session that crawlee retires (blocked: 401, 403, 429) leaves its exit behind with its task.
// HttpCrawler fetches with got-scraping: no browser to download. Certificates are verified
// (NODE_EXTRA_CA_CERTS adds a private CA); give origins by name, as got-scraping's HTTP/2 takes
// no origin by IP address.
//
// Prints one JSON line per page: task, url, status, bytes.
import { Configuration, HttpCrawler, ProxyConfiguration } from 'crawlee';

const proxy = process.env.EXITVOICE_PROXY;
const token = process.env.EXITVOICE_BROKER_TOKEN;
const leaseClass = process.env.EXITVOICE_CLASS ?? 'identity';
const urls = process.argv.slice(2);
if (!proxy || !token || urls.length === 0) {
    console.error('usage: EXITVOICE_PROXY=host:port EXITVOICE_BROKER_TOKEN=… node crawl.js URL…');
    process.exit(2);
}

// A task name keeps to letters, digits and `_`: a `-` would split the user name.
const taskOf = (sessionId) => `crawlee_${String(sessionId).replace(/[^A-Za-z0-9_]/g, '_')}`;

const proxyConfiguration = new ProxyConfiguration({
    newUrlFunction: (sessionId) => {
        const user = `class-${leaseClass}-task-${taskOf(sessionId)}`;
        return `http://${user}:${encodeURIComponent(token)}@${proxy}`;
    },
});

const crawler = new HttpCrawler(
    {
        proxyConfiguration,
        useSessionPool: true,
        sessionPoolOptions: { maxPoolSize: 2 },
        maxConcurrency: 2,
        ignoreSslErrors: false,
        // The pages may be JSON (an API), not only HTML.
        additionalMimeTypes: ['application/json'],
        async requestHandler({ request, response, body, proxyInfo }) {
            console.log(JSON.stringify({
                task: taskOf(proxyInfo.sessionId),
                url: request.url,
                status: response.statusCode,
                bytes: body.length,
            }));
        },
    },
    // Keeps the request queue in memory: nothing written under ./storage.
    new Configuration({ persistStorage: false }),
);

await crawler.run(urls);
