import Matching
import PostgresClient

/// Database errors by exit status (cli.md): the server cannot be reached (69), the configuration or
/// schema is wrong and retrying will not help (78), anything else (1).
extension PostgresError: ClassifiedError {
    /// A deadlock or serialization failure, or a lock wait given up (55P03: a unit's `lock_timeout`).
    public var isWriteConflict: Bool { isSerializationFailure || sqlState == "55P03" }

    /// The worker's table whose identity sequence is behind its rows, when this is the unique violation such a
    /// sequence gives: a database moved by logical replication (which copies rows, not sequences), or rows written
    /// with ids by hand. Each retry took the next value and failed again, as many times as there are rows
    /// (review of session 36: "the next run resumes the work", exit 1, for every notification ever written).
    public var identityBehind: String? {
        guard sqlState == "23505" else { return nil }
        return ["matcher_runs", "notifications"].first { message.contains("\"\($0)_pkey\"") }
    }

    public var failureKind: FailureKind {
        switch kind {
        case .connection:
            if message.hasPrefix("invalid connection string") { return .configuration }
            // Reached, but refused: wrong password or user, no such database. Retrying will not help.
            if let sqlState, sqlState.hasPrefix("28") || sqlState == "3D000" { return .configuration }
            // And settings libpq read but cannot use (it fills in host, port and database first, so these come
            // as "could not connect"): a bad sslmode or port, a missing certificate, SSL the server lacks, a
            // server that is not the one its certificate names, an unusable client key; and a server setting in
            // `options` or PGOPTIONS that the server refuses at the start of every session (a misspelt name, one
            // only a superuser or a restart may set).
            let refused = [
                "password authentication failed", "no password supplied", "authentication failed",
                "no pg_hba.conf entry", "does not exist", "rejects connection", "is not permitted to log in",
                "permission denied for database", "invalid sslmode value", "invalid port number",
                "invalid integer value", "invalid value for parameter", "invalid target_session_attrs value",
                "could not read root certificate file", "root certificate file", "certificate file",
                "server does not support SSL", "certificate verify failed", "does not match host name",
                "private key file", "could not load private key", "unrecognized configuration parameter",
                // PgBouncer refuses every server setting in `options` it does not track (the worker's jit=off).
                "unsupported startup parameter",
                "permission denied to set parameter", "cannot be changed without restarting the server",
                "cannot be changed now",
            ]
            if refused.contains(where: message.contains) { return .configuration }
            // The server asked for a password the client lacked: in any language, a configuration error.
            if password == .missing { return .configuration }
            // It took one and then said no in a language other than English (its refusals are written before any
            // session setting applies), whose words the list above cannot read: most likely the password, or a
            // refusal after it (no such database, no login or CONNECT privilege), all configuration. A transient
            // refusal after the password (the reserved connection slots, a shutdown) reads the same; in English
            // the words above and below tell them apart, as before.
            if password == .sent, reasonIsLocalized { return .configuration }
            // Could not reach the server at all. A connection lost mid-run is an ordinary failure (1):
            // the run reached the database, and its committed units are kept.
            return message.hasPrefix("could not connect") ? .unavailable : .other
        case .usage where message.contains("cannot parse the connection string"):
            return .configuration
        case .server:
            switch sqlState {
            // No such table, column or schema: not migrated (or an older schema); no privilege on it.
            case "42P01", "42703", "3F000", "42501": return .configuration
            // The server is starting up or out of connection slots: it cannot take us now.
            case "57P03", "53300": return .unavailable
            // An identity behind its table's rows: every attempt takes the next value and fails on the next row.
            case "23505" where identityBehind != nil: return .configuration
            default: return .other
            }
        default:
            return .other
        }
    }
}
