import MatchingPostgres
import Testing

/// Which of the app's `BEFORE UPDATE` trigger functions may set a watched column, read from their source: one
/// that may needs the capture that compares every updated row, one that cannot keeps the app's logins free.
@Suite struct AppTriggerSourceTests {
    private let watched = ["id", "status", "height_cm", "has_introduction", "languages"]

    private func reason(_ source: String, language: String = "plpgsql") -> String? {
        AppTriggerSource.mayChangeWatched(language: language, source: source, watched: watched)
    }

    @Test func aTriggerThatKeepsUpdatedAtOrReadsWatchedValuesSetsNone() {
        #expect(reason("BEGIN NEW.updated_at := now(); RETURN NEW; END") == nil)
        #expect(reason("begin new.updated_at = clock_timestamp(); return new; end") == nil)
        // Reading a watched value, comparing it, or passing it on is no assignment.
        #expect(
            reason(
                """
                BEGIN
                  IF NEW.status = 4 AND OLD.status IS DISTINCT FROM NEW.status THEN
                    NEW.deleted_on := current_date;
                  ELSIF NEW.height_cm >= 200 THEN
                    PERFORM app_note(NEW.id, NEW.height_cm);
                  END IF;
                  INSERT INTO app_audit (profile_id, status) VALUES (NEW.id, NEW.status);
                  RETURN NEW;
                END
                """) == nil)
        // Written in comments and strings only.
        #expect(
            reason(
                """
                BEGIN
                  -- NEW.status := 2;
                  /* NEW.height_cm := 170; /* nested */ RETURN OLD2; */
                  RAISE NOTICE 'NEW.status := %', NEW.status;
                  PERFORM $q$ NEW.has_introduction := true $q$;
                  RETURN NEW;
                END
                """) == nil)
        #expect(reason("BEGIN RETURN NULL; END") == nil)
    }

    @Test func aTriggerThatSetsAWatchedValueIsNamedWithTheColumn() {
        #expect(
            reason("BEGIN NEW.has_introduction := coalesce(NEW.introduction, '') <> ''; RETURN NEW; END")
                == "it sets NEW.has_introduction")
        #expect(
            reason("BEGIN\n  NEW.updated_at := now();\n  -- derived\n  NEW.status = 2;\n  RETURN NEW;\nEND")
                == "it sets NEW.status")
        #expect(
            reason(#"BEGIN IF x THEN NEW . "height_cm" := 170; END IF; RETURN NEW; END"#) == "it sets NEW.height_cm")
        #expect(reason("BEGIN NEW.languages[1] := 1; RETURN NEW; END") == "it sets NEW.languages")
        #expect(reason("BEGIN NEW.id := nextval('s'); RETURN NEW; END") == "it sets NEW.id")
    }

    @Test func aTriggerThatReplacesTheRowMaySetAnything() {
        #expect(reason("BEGIN NEW := jsonb_populate_record(NEW, '{}'); RETURN NEW; END") == "it assigns NEW as a whole")
        #expect(reason("BEGIN SELECT * INTO NEW FROM app_defaults(NEW); RETURN NEW; END") == "it selects INTO NEW")
        #expect(reason("BEGIN SELECT 1 INTO STRICT NEW.updated_at; RETURN NEW; END") == nil)
        #expect(reason("BEGIN SELECT a, b INTO v, NEW.status FROM t; RETURN NEW; END") == "it selects INTO NEW.status")
        #expect(
            reason("DECLARE r profiles; BEGIN r := NEW; r.status := 1; RETURN r; END")
                == "it returns a row other than NEW")
        #expect(reason("BEGIN RETURN app_fix(NEW); END") == "it returns a row other than NEW")
        #expect(
            reason("NEW.status := 1", language: "plpython3u")
                == "its function is in plpython3u, which the worker does not read")
        #expect(reason("SELECT 1", language: "sql") != nil)
        #expect(reason("app_trigger", language: "c") != nil)
    }

    @Test func stringsAndQuotedNamesAreReadAsPostgreSQLReadsThem() {
        #expect(AppTriggerSource.withoutCommentsAndStrings("a 'it''s -- not a comment' b") == "a   b")
        #expect(AppTriggerSource.withoutCommentsAndStrings(#"a E'\' NEW.x := 1' b"#) == "a E  b")
        #expect(AppTriggerSource.withoutCommentsAndStrings(#"NEW."Height""cm""#) == #"NEW.Height"cm"#)
        #expect(AppTriggerSource.withoutCommentsAndStrings("a$b $1 $t$ x $t$ c") == "a$b $1   c")
    }
}
