// quiclab-quic-go: a current quic-go HTTP/3 server and client (and Go's net/http for HTTP/1.1
// and HTTP/2 over the kernel's TCP), run by quiclab as one implementation among others
// (docs/stacks.md). It serves what quiclab's own server serves — `/bytes/N` (N bytes, byte i
// holding i mod 256) and the files of a directory — and its client prints one JSON line that
// quiclab reads: the implementation, its version, what was fetched and when.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlog"
)

const module = "github.com/quic-go/quic-go"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = server(os.Args[2:])
	case "get":
		err = get(os.Args[2:])
	case "version":
		fmt.Println(version())
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quiclab-quic-go:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: quiclab-quic-go server|get|version [flags] (-h for each)")
	os.Exit(2)
}

// version is quic-go's module version as built in, e.g. v0.65.0.
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == module {
				return d.Version
			}
		}
	}
	return "unknown"
}

// tcpCongestion sets the kernel TCP congestion control of a socket (the lab's hosts default to
// BBR: quiclab always says which it wants).
func tcpCongestion(cc string) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		if cc == "" || !strings.HasPrefix(network, "tcp") {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptString(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CONGESTION, cc)
		})
		if err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("TCP congestion control %q: %w", cc, serr)
		}
		return nil
	}
}

// keyLog appends TLS secrets to path, or to $SSLKEYLOGFILE (the lab sets it when it captures:
// every program of the run appends to the lab's one key log).
func keyLog(path string) (io.Writer, error) {
	if path == "" {
		path = os.Getenv("SSLKEYLOGFILE")
	}
	if path == "" {
		return nil, nil
	}
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

// patternHandler answers `/bytes/N` with N pattern bytes and anything else from root.
type patternHandler struct {
	files http.FileSystem
}

// serveFile answers with the file at the request's path (a directory's index.html), with Range
// support, and never redirects: http.FileServer answers /index.html with a 301 to ./, which a
// page's own request for it does not expect (quiclab's server, Caddy and ngtcp2 serve it).
func serveFile(files http.FileSystem, w http.ResponseWriter, r *http.Request) {
	name := r.URL.Path
	if strings.HasSuffix(name, "/") {
		name += "index.html"
	}
	f, err := files.Open(name) // http.Dir refuses paths that leave the root
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, st.Name(), st.ModTime(), f)
}

func (h patternHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/bytes/"); ok {
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		w.Header().Set("content-type", "application/octet-stream")
		w.Header().Set("content-length", strconv.FormatInt(n, 10))
		buf := make([]byte, 64*1024)
		for i := range buf {
			buf[i] = byte(i % 256)
		}
		// 64 KiB is a multiple of 256: every chunk starts at offset 0 mod 256.
		for n > 0 {
			chunk := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:chunk]); err != nil {
				return
			}
			n -= chunk
		}
		return
	}
	if h.files == nil {
		http.NotFound(w, r)
		return
	}
	serveFile(h.files, w, r)
}

func server(args []string) error {
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	addr := fs.String("addr", "", "HOST:PORT to listen on (UDP for HTTP/3, TCP for HTTP/1.1 and HTTP/2)")
	cert := fs.String("cert", "", "certificate chain (PEM)")
	key := fs.String("key", "", "private key (PEM)")
	root := fs.String("root", "", "directory whose files are served (besides /bytes/N)")
	tcpCC := fs.String("tcp-cc", "cubic", "the kernel TCP congestion control of the HTTP/1.1 and HTTP/2 listener")
	keylog := fs.String("keylog", "", "append TLS secrets to this file (NSS key log format)")
	ready := fs.String("ready", "", "create this file once both listeners accept")
	fs.Parse(args)
	if *addr == "" || *cert == "" || *key == "" {
		return errors.New("server needs --addr, --cert and --key")
	}
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		return fmt.Errorf("loading %s and %s: %w", *cert, *key, err)
	}
	kl, err := keyLog(*keylog)
	if err != nil {
		return err
	}
	var files http.FileSystem
	if *root != "" {
		files = http.Dir(*root)
	}
	handler := patternHandler{files: files}
	tlsConf := &tls.Config{Certificates: []tls.Certificate{pair}, KeyLogWriter: kl}

	udp, err := net.ListenPacket("udp", *addr)
	if err != nil {
		return err
	}
	h3 := &http3.Server{
		Handler:    handler,
		TLSConfig:  http3.ConfigureTLSConfig(tlsConf.Clone()),
		QUICConfig: &quic.Config{Tracer: qlog.DefaultConnectionTracer, Allow0RTT: true},
	}
	lc := net.ListenConfig{Control: tcpCongestion(*tcpCC)}
	tcp, err := lc.Listen(context.Background(), "tcp", *addr)
	if err != nil {
		return err
	}
	tcpTLS := tlsConf.Clone()
	tcpTLS.NextProtos = []string{"h2", "http/1.1"}
	h12 := &http.Server{Handler: handler, TLSConfig: tcpTLS}
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte(version()+"\n"), 0o644); err != nil {
			return err
		}
	}
	errs := make(chan error, 2)
	go func() { errs <- h3.Serve(udp) }()
	go func() { errs <- h12.ServeTLS(tcp, "", "") }()
	return <-errs
}

// fetch is what the client prints (one JSON line).
type fetch struct {
	Implementation string  `json:"implementation"`
	Version        string  `json:"version"`
	Proto          string  `json:"proto"`
	NegotiatedALPN string  `json:"alpn"`
	TLSVersion     string  `json:"tls_version"`
	Status         int     `json:"status"`
	Bytes          int64   `json:"bytes"`
	Verified       *bool   `json:"verified"`
	HandshakeMs    float64 `json:"handshake_ms"`
	TtfbMs         float64 `json:"ttfb_ms"`
	TotalMs        float64 `json:"total_ms"`
	Resumed        bool    `json:"resumed"`
}

// tlsVersion names a TLS version as quiclab does: "1.3", "1.2".
func tlsVersion(v uint16) string {
	return strings.TrimPrefix(tls.VersionName(v), "TLS ")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// patternCheck verifies, as the body streams by, that byte i holds i mod 256.
type patternCheck struct {
	offset int64
	ok     bool
}

func (p *patternCheck) Write(b []byte) (int, error) {
	for i, c := range b {
		if c != byte((p.offset+int64(i))%256) {
			p.ok = false
		}
	}
	p.offset += int64(len(b))
	return len(b), nil
}

func get(args []string) error {
	fs := flag.NewFlagSet("get", flag.ExitOnError)
	url := fs.String("url", "", "https URL to fetch")
	proto := fs.String("proto", "h3", "h1, h2 or h3")
	ca := fs.String("ca", "", "the lab's CA certificate (PEM)")
	connect := fs.String("connect", "", "HOST:PORT to connect to instead of the URL's (its name stays the SNI)")
	tcpCC := fs.String("tcp-cc", "cubic", "the kernel TCP congestion control for h1 and h2")
	keylog := fs.String("keylog", "", "append TLS secrets to this file")
	verify := fs.Bool("verify-pattern", false, "check the body holds the /bytes/N pattern")
	expect := fs.Int64("expect-bytes", -1, "fail unless the body has this many bytes")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	fs.Parse(args)
	if *url == "" || *ca == "" {
		return errors.New("get needs --url and --ca")
	}
	pem, err := os.ReadFile(*ca)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s holds no PEM certificate", *ca)
	}
	kl, err := keyLog(*keylog)
	if err != nil {
		return err
	}
	tlsConf := &tls.Config{RootCAs: pool, KeyLogWriter: kl}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return err
	}
	target := *connect
	if target == "" {
		target = req.URL.Host
		if req.URL.Port() == "" {
			target = net.JoinHostPort(req.URL.Hostname(), "443")
		}
	}
	out := fetch{Implementation: "quic-go", Version: version(), Proto: *proto}
	start := time.Now()
	var resp *http.Response
	switch *proto {
	case "h3":
		tlsConf.ServerName = req.URL.Hostname()
		tlsConf.NextProtos = []string{http3.NextProtoH3}
		conn, err := quic.DialAddr(ctx, target, tlsConf, &quic.Config{Tracer: qlog.DefaultConnectionTracer})
		if err != nil {
			return fmt.Errorf("QUIC handshake with %s: %w", target, err)
		}
		defer conn.CloseWithError(0, "")
		out.HandshakeMs = ms(time.Since(start))
		state := conn.ConnectionState().TLS
		out.NegotiatedALPN = state.NegotiatedProtocol
		out.TLSVersion = tlsVersion(state.Version)
		out.Resumed = state.DidResume
		tr := &http3.Transport{}
		resp, err = tr.NewClientConn(conn).RoundTrip(req)
		if err != nil {
			return err
		}
	case "h1", "h2":
		var once sync.Once
		trace := &httptrace.ClientTrace{
			TLSHandshakeDone: func(s tls.ConnectionState, _ error) {
				once.Do(func() {
					out.HandshakeMs = ms(time.Since(start))
					out.NegotiatedALPN = s.NegotiatedProtocol
					out.TLSVersion = tlsVersion(s.Version)
					out.Resumed = s.DidResume
				})
			},
		}
		req = req.WithContext(httptrace.WithClientTrace(ctx, trace))
		dialer := &net.Dialer{Control: tcpCongestion(*tcpCC)}
		tr := &http.Transport{
			TLSClientConfig: tlsConf,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, target)
			},
			DisableCompression: true,
		}
		if *proto == "h2" {
			tr.ForceAttemptHTTP2 = true
			tlsConf.NextProtos = []string{"h2"}
		} else {
			tlsConf.NextProtos = []string{"http/1.1"}
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		defer tr.CloseIdleConnections()
		resp, err = tr.RoundTrip(req)
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("--proto %q: give h1, h2 or h3", *proto)
	}
	defer resp.Body.Close()
	out.TtfbMs = ms(time.Since(start))
	out.Status = resp.StatusCode
	check := &patternCheck{ok: true}
	var sink io.Writer = io.Discard
	if *verify {
		sink = check
	}
	n, err := io.Copy(sink, resp.Body)
	out.TotalMs = ms(time.Since(start))
	out.Bytes = n
	if *verify {
		out.Verified = &check.ok
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
	if err != nil {
		return fmt.Errorf("reading the body after %d bytes: %w", n, err)
	}
	if *expect >= 0 && n != *expect {
		return fmt.Errorf("got %d bytes, expected %d", n, *expect)
	}
	if *verify && !check.ok {
		return errors.New("the body does not hold the /bytes/N pattern")
	}
	return nil
}
