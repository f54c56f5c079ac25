// A small RAII layer over the SQLite C API for the history database: a connection, prepared
// statements with typed binds and reads, and transactions that roll back when not committed. Every
// failure becomes an IoError naming the database file and SQLite's own message.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ds::report::history {

class Statement;

class Database {
 public:
  enum class Mode { kCreate, kExisting };  // kExisting: a missing file is an error, not a new database
  // Opens the file with a busy timeout (waits for another process's write lock instead of failing
  // at once). Throws ConfigError when kExisting and the file does not exist, or when it is a
  // directory; IoError otherwise.
  Database(const std::string& path, Mode mode, int busyTimeoutMs);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }
  // Runs one or more statements without results.
  void exec(const std::string& sql);
  // The first column of the first row of a query, as an integer (0 when no row).
  std::int64_t queryInt(const std::string& sql);
  std::string queryText(const std::string& sql);
  int changes() const;
  // An IoError naming the database, `what` (an operation in words, never the SQL), what SQLite's code
  // means for the user (locked, not a SQLite database, damaged, not writable, disk full, I/O error,
  // tables not ours) and what to do, then SQLite's own short message.
  [[noreturn]] void fail(const std::string& what, int rc) const;

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

class Statement {
 public:
  Statement(Database& db, const std::string& sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds by 1-based index; returns *this so binds chain.
  Statement& bind(int i, const std::string& v);
  Statement& bind(int i, std::int64_t v);
  Statement& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Statement& bind(int i, double v);
  Statement& bindNull(int i);
  // Steps once: true when a row is ready to read, false when done.
  bool step();
  // Runs to completion (for INSERT/UPDATE) and resets for the next use.
  void run();
  void reset();

  std::string text(int col) const;
  std::int64_t integer(int col) const;
  double real(int col) const;
  bool isNull(int col) const;

 private:
  Database& db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// Inserts rows given as (column, value) pairs, so a value sits next to the name of its column and
// cannot drift into another. The statement is prepared from the first row's columns; every later
// row must name the same columns in the same order (an internal error otherwise).
class RowInserter {
 public:
  // std::monostate: SQL NULL (an unknown figure).
  using Value = std::variant<std::int64_t, double, std::string, std::monostate>;
  struct Column {
    const char* name;
    Value value;
  };
  // verb: "INSERT" or "INSERT OR IGNORE".
  RowInserter(Database& db, std::string verb, std::string table);
  ~RowInserter();
  void insert(std::initializer_list<Column> row);
  // A value, or NULL when unknown.
  static Value orNull(const std::optional<double>& v) { return v ? Value(*v) : Value(std::monostate{}); }

 private:
  Database& db_;
  std::string verb_, table_;
  std::vector<std::string> columns_;
  std::unique_ptr<Statement> stmt_;
};

// BEGIN IMMEDIATE on construction (takes the write lock now, so two writers queue on the busy
// timeout instead of one failing with SQLITE_BUSY at its first write); ROLLBACK in the destructor
// unless commit() ran.
class WriteTransaction {
 public:
  explicit WriteTransaction(Database& db);
  ~WriteTransaction();
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace ds::report::history
