package tables

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/llmgw/gateway/accounting/ledger"
)

// Error is a failure of the database itself (connection lost, statement failed). Its
// message names the operation and, for server errors, the SQLSTATE; never SQL text or
// row values. Unwrap gives the underlying pgx error for logs.
type Error struct {
	Op       string
	SQLState string
	Err      error
}

func (e *Error) Error() string {
	if e.SQLState != "" {
		return fmt.Sprintf("ledger store: %s failed (SQLSTATE %s)", e.Op, e.SQLState)
	}
	return fmt.Sprintf("ledger store: %s failed: database unavailable", e.Op)
}

func (e *Error) Unwrap() error { return e.Err }

// SQLSTATEs this boundary translates.
const (
	sqlUniqueViolation     = "23505"
	sqlForeignKeyViolation = "23503"
	sqlCheckViolation      = "23514"
	sqlNumericOutOfRange   = "22003"
	sqlInvalidText         = "22P02"
	sqlLockNotAvailable    = "55P03" // lock_timeout
	sqlQueryCanceled       = "57014" // statement_timeout (a cancelled context is caught first)
)

// dbError translates a pgx error of operation op into a domain error: no rows →
// ErrNotFound, unique → AlreadyExists, foreign key → ErrNotFound, check or overflow →
// InvalidArgument; a lock or statement timeout → *Error wrapping ledger.ErrBusy; context
// errors pass through; anything else becomes *Error.
func dbError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.ErrNotFound
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &Error{Op: op, Err: err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case sqlUniqueViolation:
			return ledger.Refuse(ledger.ReasonAlreadyExists, op+": already exists")
		case sqlForeignKeyViolation, sqlInvalidText:
			return ledger.ErrNotFound
		case sqlCheckViolation, sqlNumericOutOfRange:
			return ledger.Refuse(ledger.ReasonInvalidArgument, op+": value out of range")
		case sqlLockNotAvailable, sqlQueryCanceled:
			return &Error{Op: op, SQLState: pgErr.Code, Err: fmt.Errorf("%w: %w", ledger.ErrBusy, err)}
		}
		return &Error{Op: op, SQLState: pgErr.Code, Err: err}
	}
	return &Error{Op: op, Err: err}
}

// validID reports whether id has the textual form of the UUIDs the database generates
// for every id (8-4-4-4-12 hex digits); anything else cannot name a row.
func validID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
