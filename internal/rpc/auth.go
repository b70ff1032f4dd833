package rpc

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
)

const nonceSize = 32

func newNonce() []byte {
	b := make([]byte, nonceSize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return b
}

// proof is the challenge-response MAC: HMAC-SHA256 over a role label and
// both nonces, so the secret never crosses the wire and neither side's
// proof can be replayed as the other's or on another connection.
func proof(secret []byte, role string, first, second []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("pdc-auth-v1 "))
	m.Write([]byte(role))
	m.Write(first)
	m.Write(second)
	return m.Sum(nil)
}

func clientProof(secret, serverNonce, clientNonce []byte) []byte {
	return proof(secret, "client", serverNonce, clientNonce)
}

func serverProof(secret, serverNonce, clientNonce []byte) []byte {
	return proof(secret, "server", clientNonce, serverNonce)
}
