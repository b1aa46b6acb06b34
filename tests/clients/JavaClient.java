// Minimal java.net.http.HttpClient request (HTTP_2). Usage: java tests/clients/JavaClient.java <url> <ca.pem>
import java.io.FileInputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

public class JavaClient {
    public static void main(String[] a) throws Exception {
        X509Certificate ca = (X509Certificate) CertificateFactory.getInstance("X.509")
                .generateCertificate(new FileInputStream(a[1]));
        KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
        ks.load(null, null);
        ks.setCertificateEntry("zooca", ca);
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ks);
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(null, tmf.getTrustManagers(), null);
        HttpClient c = HttpClient.newBuilder().sslContext(ctx).version(HttpClient.Version.HTTP_2).build();
        HttpResponse<String> r = c.send(HttpRequest.newBuilder(URI.create(a[0])).build(),
                HttpResponse.BodyHandlers.ofString());
        System.out.print("java " + System.getProperty("java.version") + " " + r.version() + " " + r.statusCode() + ": " + r.body());
    }
}
