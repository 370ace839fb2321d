package controllers

// logChange decides when a recurring error is logged: when its text
// differs from the last one logged, and again after a success (a nil
// error) cleared it, so a second outage with the same error is logged
// and a retry loop does not repeat the same line.
type logChange struct {
	last string
}

// changed records err and says whether to log it.
func (l *logChange) changed(err error) bool {
	if err == nil {
		l.last = ""
		return false
	}
	if err.Error() == l.last {
		return false
	}
	l.last = err.Error()
	return true
}
