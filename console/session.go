package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/spentledger/spent/internal/grant"
)

// cookieName is the name of the session cookie.
const cookieName = "spent_ui"

// session is one visitor's state: the grant it logged in with (nil before
// login) and the CSRF token its forms carry.
type session struct {
	key     [sha256.Size]byte // SHA-256 of the id in the cookie
	grant   *grant.Grant
	csrf    string
	created time.Time
	expires time.Time
	flash   string // a message for the next page, once
}

// sessions are the console's sessions, kept in memory and bounded. They
// are looked up by the SHA-256 of the cookie's id, so that the map holds
// nothing a cookie could be made from.
type sessions struct {
	mu   sync.Mutex
	m    map[[sha256.Size]byte]*session
	max  int
	rand io.Reader
}

func newSessions(max int, rand io.Reader) *sessions {
	return &sessions{m: map[[sha256.Size]byte]*session{}, max: max, rand: rand}
}

// random returns n random bytes in unpadded base64url.
func (s *sessions) random(n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(s.rand, b); err != nil {
		return "", fmt.Errorf("console: randomness: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// create starts a session with g (nil: not logged in) that lasts life, and
// returns it with the id for its cookie. When the sessions are full it
// forgets the expired ones, then the oldest that has not logged in, then
// the oldest.
func (s *sessions) create(g *grant.Grant, now time.Time, life time.Duration) (*session, string, error) {
	id, err := s.random(32)
	if err != nil {
		return nil, "", err
	}
	csrf, err := s.random(32)
	if err != nil {
		return nil, "", err
	}
	ss := &session{key: sha256.Sum256([]byte(id)), grant: g, csrf: csrf, created: now, expires: now.Add(life)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		s.evict(now)
	}
	s.m[ss.key] = ss
	return ss, id, nil
}

// evict makes room for one session. s.mu is held.
func (s *sessions) evict(now time.Time) {
	for k, ss := range s.m {
		if !now.Before(ss.expires) {
			delete(s.m, k)
		}
	}
	if len(s.m) < s.max {
		return
	}
	var oldest *session
	for _, ss := range s.m {
		if oldest == nil || evictsBefore(ss, oldest) {
			oldest = ss
		}
	}
	delete(s.m, oldest.key)
}

// evictsBefore reports whether a goes before b when the sessions are full:
// a session that has not logged in before one that has, then the older.
func evictsBefore(a, b *session) bool {
	if (a.grant == nil) != (b.grant == nil) {
		return a.grant == nil
	}
	return a.created.Before(b.created)
}

// get returns the live session of r's cookie, or nil.
func (s *sessions) get(r *http.Request, now time.Time) *session {
	ck, err := r.Cookie(cookieName)
	if err != nil || len(ck.Value) > 64 {
		return nil
	}
	key := sha256.Sum256([]byte(ck.Value))
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[key]
	if ss == nil {
		return nil
	}
	if !now.Before(ss.expires) {
		delete(s.m, key)
		return nil
	}
	return ss
}

// drop forgets ss.
func (s *sessions) drop(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, ss.key)
}

// takeFlash returns ss's message for the next page and clears it.
func (s *sessions) takeFlash(ss *session) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := ss.flash
	ss.flash = ""
	return f
}

// setFlash leaves a message for ss's next page.
func (s *sessions) setFlash(ss *session, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss.flash = msg
}

// checkCSRF reports whether the form's token is ss's, in constant time.
func (ss *session) checkCSRF(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), []byte(ss.csrf)) == 1
}

// setCookie sets the cookie of the session id, for the time left to ss.
func (c *Console) setCookie(w http.ResponseWriter, id string, ss *session) {
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName,
		Value:    id,
		Path:     Prefix,
		MaxAge:   int(ss.expires.Sub(ss.created) / time.Second),
		HttpOnly: true,
		Secure:   c.cfg.Secure,
		SameSite: http.SameSiteStrictMode,
	})
}

// clearCookie removes the session cookie.
func (c *Console) clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, Secure: c.cfg.Secure, SameSite: http.SameSiteStrictMode,
	})
}
