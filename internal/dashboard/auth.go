package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
)

// cookieName holds the token in a browser once it opened the address
// with ?token=.
const cookieName = "pdc_dashboard"

// Token is the dashboard's access token for a cluster secret: derived
// from it, so that the address that carries it does not carry the
// secret itself.
func Token(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("pdc dashboard token v1"))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// authorize passes requests that carry the token (as ?token=, a cookie
// or an Authorization: Bearer header) to next; a token in the query
// becomes a cookie and is taken out of the address. With no token
// (loopback, or --insecure), every request passes.
func authorize(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	ok := func(got string) bool { return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query().Get("token"); q != "" && ok(q) {
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			u := *r.URL
			v := u.Query()
			v.Del("token")
			u.RawQuery = v.Encode()
			http.Redirect(w, r, (&url.URL{Path: u.Path, RawQuery: u.RawQuery}).String(), http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(cookieName); err == nil && ok(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		if h := r.Header.Get("Authorization"); len(h) > 7 && h[:7] == "Bearer " && ok(h[7:]) {
			next.ServeHTTP(w, r)
			return
		}
		http.Error(w, "pdc dashboard: this dashboard needs the cluster's token: open the address pdc dashboard printed (it ends in ?token=)", http.StatusUnauthorized)
	})
}

// loopbackOnly passes to next only requests addressed to a loopback name
// (localhost, 127.0.0.1, ::1). A dashboard on loopback asks no token, so
// without this a web page elsewhere whose name it makes resolve to
// 127.0.0.1 (DNS rebinding) could read the cluster's view from the
// browser of a user on this host.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			http.Error(w, "pdc dashboard: this dashboard answers on loopback only: open it as http://127.0.0.1:PORT/ or http://localhost:PORT/", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
