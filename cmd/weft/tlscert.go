package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// certStore holds the serving certificate; reload swaps it in place, so a
// renewed certificate is used by new connections without a restart.
type certStore struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// newCertStore loads and checks the key pair (a bad path or a key that
// does not match fails here).
func newCertStore(certFile, keyFile string) (*certStore, error) {
	s := &certStore{certFile: certFile, keyFile: keyFile}
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// reload reads the key pair again; on error the current one stays.
func (s *certStore) reload() error {
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return fmt.Errorf("TLS: %w", err)
	}
	s.cur.Store(&cert)
	return nil
}

// config is the server TLS config that serves the current certificate.
func (s *certStore) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cur.Load(), nil
		},
	}
}

// reloadOnSIGHUP reloads s on every SIGHUP until stop is called.
func reloadOnSIGHUP(s *certStore, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() { // ends at stop
		defer close(exited)
		for {
			select {
			case <-hup:
				if err := s.reload(); err != nil {
					log.Error("SIGHUP: certificate not reloaded; keeping the current one", "err", err)
				} else {
					log.Info("SIGHUP: certificate reloaded", "cert", s.certFile)
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-exited
	}
}
