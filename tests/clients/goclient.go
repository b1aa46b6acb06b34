// Minimal Go net/http client (stdlib only). Built by scripts/install-test-deps.sh into .tools/bin/goclient.
// Usage: goclient <url> <ca.pem> [h1]   (h1 turns HTTP/2 off)
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
)

func main() {
	url, caFile := os.Args[1], os.Args[2]
	pem, err := os.ReadFile(caFile)
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	if len(os.Args) > 3 && os.Args[3] == "h1" {
		tr.ForceAttemptHTTP2 = false
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s %s %s: %s", runtime.Version(), resp.Proto, resp.Status, b)
}
