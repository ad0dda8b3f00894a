import Foundation

/// An error from the database client: a failed connection, an error reported by
/// the server, a value that could not be decoded, a failed COPY, or a misuse of the API.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Hashable {
        /// Connecting failed, or the connection was lost.
        case connection
        /// The server reported an error (see `sqlState`).
        case server
        /// A received value did not have the expected type, length or shape.
        case decoding
        /// The COPY data stream was malformed or could not be sent.
        case copy
        /// The API was used incorrectly (closed connection, wrong statement, nested transaction, …).
        case usage
    }

    public let kind: Kind
    /// The five-character SQLSTATE of server errors ("42601", "23505", …).
    public let sqlState: String?
    public let message: String
    public let detail: String?
    public let hint: String?
    /// The server's non-localized severity ("ERROR", "FATAL", "PANIC") for server errors.
    public let severity: String?
    /// For a failed connect: whether the server asked for a password, and whether one was sent
    /// (`PQconnectionNeedsPassword`, `PQconnectionUsedPassword`). It does not depend on the language of the
    /// server's messages, which a login refusal is written in before any session setting applies.
    public let password: PasswordExchange?
    /// For a failed connect: whether libpq's words hold a character outside ASCII, as a server whose
    /// `lc_messages` is not English writes its refusals.
    public let reasonIsLocalized: Bool

    public enum PasswordExchange: Sendable, Hashable {
        /// The server asked for a password and the client had none.
        case missing
        /// The server asked for a password, was sent one, and the connection then failed: a wrong password,
        /// or a refusal after it (no such database, no login or CONNECT privilege, the role's connection limit).
        case sent
    }

    public init(
        kind: Kind, sqlState: String? = nil, message: String, detail: String? = nil, hint: String? = nil,
        severity: String? = nil, password: PasswordExchange? = nil, reasonIsLocalized: Bool = false
    ) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
        self.severity = severity
        self.password = password
        self.reasonIsLocalized = reasonIsLocalized
    }

    /// One line, for example `ERROR 23505: duplicate key value violates unique constraint "t_pkey" (detail: Key (id)=(1) already exists.)`.
    public var description: String {
        var text: String
        switch kind {
        case .server:
            text = "\(severity ?? "ERROR")\(sqlState.map { " \($0)" } ?? ""): \(message)"
        case .connection:
            text =
                sqlState.map { "connection error (\(severity ?? "ERROR") \($0)): \(message)" }
                ?? "connection error: \(message)"
        case .decoding: text = "decoding error: \(message)"
        case .copy: text = "COPY error: \(message)"
        case .usage: text = "usage error: \(message)"
        }
        if let detail, !detail.isEmpty { text += " (detail: \(detail))" }
        if let hint, !hint.isEmpty { text += " (hint: \(hint))" }
        return singleLine(text)
    }
}

extension PostgresError {
    /// SQLSTATE 40001 or 40P01: the transaction may succeed when retried.
    public var isSerializationFailure: Bool { sqlState == "40001" || sqlState == "40P01" }
    /// SQLSTATE 23505.
    public var isUniqueViolation: Bool { sqlState == "23505" }
    /// SQLSTATE 57014: the statement was cancelled (`cancelCurrentStatement`, `statement_timeout`).
    public var isQueryCanceled: Bool { sqlState == "57014" }
}

/// Joins libpq's multi-line messages ("…failed: …\n\tIs the server running…") into one line.
func singleLine(_ text: String) -> String {
    text.split(whereSeparator: \.isNewline)
        .map { $0.trimmingCharacters(in: .whitespaces) }
        .filter { !$0.isEmpty }
        .joined(separator: " ")
}
